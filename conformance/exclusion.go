package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locker-go/locker"
)

// The checks of who may hold a key: one holder at a time, per key, per owner.

// 8 clients × 25 rounds around an unprotected read-sleep-write counter: any
// overlap of two holders loses an update.
func checkMutualExclusion(e *env) error {
	const clients, rounds = 8, 25
	ls, err := e.clientsN(clients)
	if err != nil {
		return err
	}
	r := &counterRace{e: e, key: e.prefix + "k"}
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(func() {
			for range rounds {
				if !r.round(l) {
					return
				}
			}
		})
	}
	wg.Wait()
	if got := r.counter.Load(); got != clients*rounds {
		e.errorf("counter = %d, want %d: an update was lost to overlapping holders", got, clients*rounds)
	}
	for i := 1; i < len(r.fences); i++ {
		if r.fences[i] <= r.fences[i-1] {
			return fmt.Errorf("fence %d of acquisition %d is not above %d of the one before", r.fences[i], i, r.fences[i-1])
		}
	}
	return nil
}

// counterRace is what MutualExclusion's clients share.
type counterRace struct {
	e               *env
	key             string
	counter, inside atomic.Int64
	mu              sync.Mutex
	fences          []uint64
}

// round takes the key once and increments the counter under it; false if
// the client must stop, its failure recorded.
func (r *counterRace) round(l locker.Locker) bool {
	ctx, cancel := context.WithTimeout(r.e.ctx, time.Minute)
	lease, err := l.Lock(ctx, r.key)
	cancel()
	if err != nil {
		r.e.error(err)
		return false
	}
	if n := r.inside.Add(1); n != 1 {
		r.e.errorf("%d holders at once", n)
	}
	r.mu.Lock()
	r.fences = append(r.fences, lease.Fence())
	r.mu.Unlock()
	v := r.counter.Load()
	time.Sleep(100 * time.Microsecond) // widen the window a second holder would hit
	r.counter.Store(v + 1)
	r.inside.Add(-1)
	if err := lease.Unlock(r.e.ctx); err != nil {
		r.e.error(err)
		return false
	}
	return true
}

func checkTryLockHeld(e *env) error {
	key := e.prefix + "k"
	a, b, err := e.two()
	if err != nil {
		return err
	}
	held, err := e.tryLock(a, key)
	if err != nil {
		return err
	}
	for name, l := range map[string]locker.Locker{"other client": b, "same client, other owner": a} {
		if lease, err := l.TryLock(e.ctx, key); !errors.Is(err, locker.ErrLocked) {
			e.errorf("%s: TryLock on a held key = %v, %v; want ErrLocked", name, lease, err)
		}
	}
	if err := held.Err(); err != nil {
		e.errorf("holder's Err = %v after a refused TryLock", err)
	}
	if err := e.unlock(held); err != nil {
		return err
	}
	return e.tryUnlock(b, key)
}

func checkIndependentKeys(e *env) error {
	ls, err := e.clientsN(2)
	if err != nil {
		return err
	}
	held, err := e.lock(ls[0], e.prefix+"one")
	if err != nil {
		return err
	}
	if err := e.tryUnlock(ls[1], e.prefix+"two"); err != nil {
		return err
	}
	return e.unlock(held)
}

// Pattern characters of Redis, SQL LIKE, globs and paths mean nothing in a key.
func checkOpaqueKeys(e *env) error {
	p := e.prefix
	names := []string{"a", "a.b", "a-b", "a%b", "a_b", "a*", "a?", "[a]", "a/b", "a/b/c", "a\\b", "ab", "ключ", "a b", "{a}"}
	a, b, err := e.two()
	if err != nil {
		return err
	}
	leases := map[string]locker.Lease{}
	for _, n := range names {
		if leases[n], err = e.tryLock(a, p+n); err != nil { // each is free although the others are held
			return err
		}
	}
	for _, n := range names {
		if _, err := b.TryLock(e.ctx, p+n); !errors.Is(err, locker.ErrLocked) {
			e.errorf("TryLock(%q) held by another client = %v, want ErrLocked", n, err)
		}
	}
	for _, n := range []string{"a*", "a/b", "a%b"} {
		if err := e.unlock(leases[n]); err != nil {
			return err
		}
		delete(leases, n)
		if err := e.tryUnlock(b, p+n); err != nil {
			return err
		}
	}
	for n, lease := range leases { // releasing those freed nothing else
		if _, err := b.TryLock(e.ctx, p+n); !errors.Is(err, locker.ErrLocked) {
			e.errorf("TryLock(%q) = %v after other keys were released, want ErrLocked", n, err)
		}
		if lease.Key() != p+n {
			e.errorf("Key() = %q, want %q", lease.Key(), p+n)
		}
	}
	return nil
}

func checkReentry(e *env) error {
	key := e.prefix + "k"
	a, b, err := e.two()
	if err != nil {
		return err
	}
	me := locker.WithOwner("owner-" + runID)
	first, err := e.tryLock(a, key, me)
	if err != nil {
		return err
	}
	second, err := e.lock(a, key, me)
	if err != nil {
		return err
	}
	if first.Fence() != second.Fence() {
		e.errorf("re-entry changed the fence: %d then %d", first.Fence(), second.Fence())
	}
	if first.Owner() != "owner-"+runID || second.Owner() != first.Owner() {
		e.errorf("Owner() = %q, %q; want the WithOwner id", first.Owner(), second.Owner())
	}
	if _, err := b.TryLock(e.ctx, key, locker.WithOwner("someone-else")); !errors.Is(err, locker.ErrLocked) {
		e.errorf("another owner's TryLock = %v, want ErrLocked", err)
	}
	if err := e.unlock(first); err != nil {
		return err
	}
	if _, err := b.TryLock(e.ctx, key); !errors.Is(err, locker.ErrLocked) {
		e.errorf("TryLock after one of two Unlocks = %v, want ErrLocked", err)
	}
	if err := e.unlock(second); err != nil {
		return err
	}
	return e.tryUnlock(b, key)
}

func checkDoubleUnlock(e *env) error {
	key := e.prefix + "k"
	a, b, err := e.two()
	if err != nil {
		return err
	}
	lease, err := e.tryLock(a, key)
	if err != nil {
		return err
	}
	if err := e.unlock(lease); err != nil {
		return err
	}
	next, err := e.tryLock(b, key)
	if err != nil {
		return err
	}
	if err := lease.Unlock(e.ctx); !errors.Is(err, locker.ErrNotHeld) {
		e.errorf("second Unlock = %v, want ErrNotHeld", err)
	}
	if err := lease.Refresh(e.ctx); !errors.Is(err, locker.ErrNotHeld) {
		e.errorf("Refresh after Unlock = %v, want ErrNotHeld", err)
	}
	if err := lease.Err(); !errors.Is(err, locker.ErrNotHeld) {
		e.errorf("Err after Unlock = %v, want ErrNotHeld", err)
	}
	select {
	case <-lease.Done():
	default:
		e.errorf("Done not closed after Unlock")
	}
	if _, err := a.TryLock(e.ctx, key); !errors.Is(err, locker.ErrLocked) {
		e.errorf("double Unlock released the next owner's lock: TryLock = %v", err)
	}
	return e.unlock(next)
}
