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

// The checks of semaphores (locker.Limit): at most n holders, each grant
// fenced above the last, FIFO waiters, mismatches refused, and the slot of
// a crashed holder freed within its TTL. A backend whose driver keeps no
// limits grants a Limit lease alone (more is locked, never less): the
// checks that sharing shares are then skipped, saying so.

// limitKept reports whether the backend lets two Limit(2) leases hold a
// key together; if not, the skip that says why.
func (e *env) limitKept(a, b locker.Locker, key string) error {
	first, err := e.tryLock(a, key, locker.Limit(2))
	if err != nil {
		return err
	}
	defer func() { _ = first.Unlock(e.ctx) }()
	second, err := b.TryLock(e.ctx, key, locker.Limit(2))
	switch {
	case errors.Is(err, locker.ErrLocked):
		return skip("the driver keeps no limits (no driver.Limiter): a Limit lease is exclusive")
	case err != nil:
		return fmt.Errorf("TryLock(%q, Limit(2)) beside one holder: %w", key, err)
	}
	return e.unlock(second)
}

// checkLimit: Limit(3) admits three owners and refuses the fourth until one
// leaves; fences rise with each grant; re-entry takes no slot; another n,
// another mode, or Limit beside Shared are ErrModeMismatch and Limit(0)
// ErrInvalidOption, each taking nothing.
func checkLimit(e *env) error {
	key := e.prefix + "k"
	ls, err := e.clientsN(4)
	if err != nil {
		return err
	}
	if _, err := ls[0].TryLock(e.ctx, key, locker.Limit(0)); !errors.Is(err, locker.ErrInvalidOption) {
		e.errorf("Limit(0) = %v; want ErrInvalidOption", err)
	}
	if err := e.limitKept(ls[0], ls[1], e.prefix+"kept"); err != nil {
		return err
	}
	var held []locker.Lease
	var last uint64
	for i, l := range ls[:3] {
		lease, err := e.tryLock(l, key, locker.Limit(3), locker.WithOwner(fmt.Sprint("owner-", i)))
		if err != nil {
			return fmt.Errorf("holder %d of a Limit(3): %w", i+1, err)
		}
		if lease.Fence() <= last {
			e.errorf("holder %d's fence %d is not above %d", i+1, lease.Fence(), last)
		}
		last = lease.Fence()
		held = append(held, lease)
	}
	again, err := e.tryLock(ls[0], key, locker.Limit(3), locker.WithOwner("owner-0"))
	if err != nil {
		e.errorf("re-entry of a Limit(3) holder: %v", err)
	} else {
		held = append(held, again)
	}
	e.limitRefusals(ls[3], key)
	if err := e.unlock(held[1]); err != nil {
		return err
	}
	fourth, err := e.tryLock(ls[3], key, locker.Limit(3))
	if err != nil {
		return fmt.Errorf("a Limit(3) with a slot free: %w", err)
	}
	if fourth.Fence() <= last {
		e.errorf("the fourth grant's fence %d is not above %d", fourth.Fence(), last)
	}
	for _, l := range append(held[:1:1], append(held[2:], fourth)...) {
		if err := e.unlock(l); err != nil {
			return err
		}
	}
	return nil
}

// limitRefusals: with three holders of a Limit(3) (one re-entered), a
// fourth owner is refused, and a mismatch is refused as such.
func (e *env) limitRefusals(l locker.Locker, key string) {
	if lease, err := l.TryLock(e.ctx, key, locker.Limit(3)); !errors.Is(err, locker.ErrLocked) {
		e.errorf("a fourth holder of a Limit(3) (one of the three re-entered): %s; want ErrLocked", outcome(lease, err))
		if err == nil {
			_ = lease.Unlock(e.ctx)
		}
	}
	for what, opts := range map[string][]locker.Option{
		"Limit(2)": {locker.Limit(2)}, "an exclusive lock": nil, "a shared lock": {locker.Shared()},
		"Limit(3) with Shared": {locker.Limit(3), locker.Shared()},
	} {
		if lease, err := l.TryLock(e.ctx, key, opts...); !errors.Is(err, locker.ErrModeMismatch) {
			e.errorf("%s on a key held by a Limit(3): %s; want ErrModeMismatch", what, outcome(lease, err))
			if err == nil {
				_ = lease.Unlock(e.ctx)
			}
		}
	}
}

// checkLimitContention: 50 contenders (Harness.Contenders) for a Limit(3)
// key, five on each client (so many connections at once would measure the
// connecting): never a fourth holder at once, no fence granted twice, and
// every contender served.
func checkLimitContention(e *env) error {
	key := e.prefix + "k"
	n := e.h.contenders()
	clients, err := e.limitClients(max((n+4)/5, 2))
	if err != nil {
		return err
	}
	ls := make([]locker.Locker, n)
	for i := range ls {
		ls[i] = clients[i%len(clients)]
	}
	var (
		holding, most atomic.Int32
		mu            sync.Mutex
		fences        = map[uint64]bool{}
		wg            sync.WaitGroup
	)
	for _, l := range ls {
		wg.Go(func() {
			for range 2 {
				lease, err := e.lock(l, key, locker.Limit(3))
				if err != nil {
					e.error(err)
					return
				}
				n := holding.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				mu.Lock()
				if fences[lease.Fence()] {
					e.errorf("fence %d granted twice", lease.Fence())
				}
				fences[lease.Fence()] = true
				mu.Unlock()
				time.Sleep(2 * time.Millisecond) // a holder works a while
				holding.Add(-1)
				if err := e.unlock(lease); err != nil {
					e.error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// (How many held together at most is the backend's speed, not the
	// contract: limitKept showed that holders share.)
	if m := most.Load(); m > 3 {
		e.errorf("%d holders at once of a Limit(3) under %d contenders; never more than 3", m, n)
	}
	e.logf("%d contenders, %d grants, at most %d holders at once", n, len(fences), most.Load())
	return nil
}

// limitClients makes n clients, once two have shown that the backend keeps
// limits, and makes each client's first call, one at a time: the checks
// are of holding, not of n clients connecting at once (through proxies,
// under -race, a Redlock client's first calls missed their per-master
// timeout).
func (e *env) limitClients(n int) ([]locker.Locker, error) {
	ls, err := e.clientsN(2)
	if err != nil {
		return nil, err
	}
	if err := e.limitKept(ls[0], ls[1], e.prefix+"kept"); err != nil {
		return nil, err
	}
	more, err := e.clientsN(n - 2)
	if err != nil {
		return nil, err
	}
	ls = append(ls, more...)
	for _, l := range ls {
		if err := e.tryUnlock(l, e.prefix+"warm"); err != nil {
			return nil, err
		}
	}
	return ls, nil
}

// checkLimitAfterCrash: a holder of a Limit(2) crashes; its slot frees
// within the TTL while the other holder goes on.
func checkLimitAfterCrash(e *env) error {
	if e.h.Crash == nil {
		return skip("Harness.Crash is nil: no way to crash a client")
	}
	key := e.prefix + "k"
	ls, err := e.clientsN(3)
	if err != nil {
		return err
	}
	if err := e.limitKept(ls[1], ls[2], e.prefix+"kept"); err != nil {
		return err
	}
	ttl := e.h.ttl()
	crashed, err := e.tryLock(ls[0], key, locker.Limit(2), locker.WithTTL(ttl))
	if err != nil {
		return err
	}
	stays, err := e.tryLock(ls[1], key, locker.Limit(2))
	if err != nil {
		return err
	}
	if err := e.h.Crash(e.ctx, ls[0]); err != nil {
		return fmt.Errorf("Crash: %w", err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, ttl+slack)
	defer cancel()
	next, err := ls[2].Lock(ctx, key, locker.Limit(2))
	if err != nil {
		return fmt.Errorf("the crashed holder's slot not free within TTL %v + %v: %w", ttl, slack, err)
	}
	if next.Fence() <= max(crashed.Fence(), stays.Fence()) {
		e.errorf("fence %d after the crash is not above %d and %d", next.Fence(), crashed.Fence(), stays.Fence())
	}
	if stays.Err() != nil {
		e.errorf("the other holder's lease ended: %v", stays.Err())
	}
	return errors.Join(e.unlock(next), e.unlock(stays))
}

// outcome describes a TryLock's result for a message.
func outcome(lease locker.Lease, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("granted, fence %d", lease.Fence())
}
