package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/locker-go/locker"
)

// The checks of `locker check`, one function each; every one returns nil
// or what it saw go wrong.

// Clients × rounds around an unprotected read-sleep-write counter: any
// overlap of two holders loses an update. Fences must rise.
func checkMutualExclusion(ctx context.Context, c *checker) error {
	const clients, rounds = 4, 10
	ls, err := c.clientsN(ctx, clients)
	if err != nil {
		return err
	}
	key := c.prefix + "k"
	var (
		mu      sync.Mutex
		counter int
		fences  []uint64
		wg      sync.WaitGroup
		errs    = make(chan error, clients)
	)
	for _, l := range ls {
		wg.Go(func() {
			for range rounds {
				lease, err := l.Lock(ctx, key)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				v := counter
				fences = append(fences, lease.Fence())
				mu.Unlock()
				time.Sleep(time.Millisecond) // widen the window a second holder would hit
				mu.Lock()
				counter = v + 1
				mu.Unlock()
				if err := lease.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if counter != clients*rounds {
		return fmt.Errorf("counter = %d, want %d: overlapping holders lost an update", counter, clients*rounds)
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			return fmt.Errorf("fence %d of acquisition %d is not above %d before it", fences[i], i, fences[i-1])
		}
	}
	return nil
}

func checkTryLockHeld(ctx context.Context, c *checker) error {
	ls, err := c.clientsN(ctx, 2)
	if err != nil {
		return err
	}
	key := c.prefix + "k"
	held, err := ls[0].TryLock(ctx, key)
	if err != nil {
		return err
	}
	for name, l := range map[string]locker.Locker{"another client": ls[1], "the same client": ls[0]} {
		if _, err := l.TryLock(ctx, key); !errors.Is(err, locker.ErrLocked) {
			return fmt.Errorf("TryLock by %s on a held key = %v, want ErrLocked", name, err)
		}
	}
	if err := held.Unlock(ctx); err != nil {
		return err
	}
	next, err := ls[1].TryLock(ctx, key)
	if err != nil {
		return fmt.Errorf("TryLock after Unlock: %w", err)
	}
	return next.Unlock(ctx)
}

func checkOpaqueKeys(ctx context.Context, c *checker) error {
	ls, err := c.clientsN(ctx, 2)
	if err != nil {
		return err
	}
	names := []string{"a", "a.b", "a-b", "a%b", "a_b", "a*", "a?", "[a]", "a/b", "ключ", "a b"}
	var leases []locker.Lease
	for _, n := range names {
		lease, err := ls[0].TryLock(ctx, c.prefix+n)
		if err != nil {
			return fmt.Errorf("TryLock(%q) with the other keys held: %w", n, err)
		}
		leases = append(leases, lease)
	}
	for _, n := range names {
		if _, err := ls[1].TryLock(ctx, c.prefix+n); !errors.Is(err, locker.ErrLocked) {
			return fmt.Errorf("TryLock(%q) held by another client = %v, want ErrLocked", n, err)
		}
	}
	for _, l := range leases {
		if err := l.Unlock(ctx); err != nil {
			return err
		}
	}
	return nil
}

// expire takes key without keep-alive and waits for another client to get it.
func expire(ctx context.Context, c *checker, a, b locker.Locker, key string) (old, next locker.Lease, err error) {
	old, err = a.TryLock(ctx, key, locker.WithTTL(c.ttl), locker.WithKeepAlive(false))
	if err != nil {
		return nil, nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, c.ttl+slack)
	defer cancel()
	if next, err = b.Lock(wctx, key); err != nil {
		return nil, nil, fmt.Errorf("key not free within TTL %v + %v after its holder stopped refreshing: %w", c.ttl, slack, err)
	}
	return old, next, nil
}

func checkExpiry(ctx context.Context, c *checker) error {
	ls, err := c.clientsN(ctx, 2)
	if err != nil {
		return err
	}
	old, next, err := expire(ctx, c, ls[0], ls[1], c.prefix+"k")
	if err != nil {
		return err
	}
	select {
	case <-old.Done():
	case <-time.After(slack):
		return fmt.Errorf("expired lease's Done not closed")
	}
	if !errors.Is(old.Err(), locker.ErrLeaseLost) {
		return fmt.Errorf("expired lease's Err = %v, want ErrLeaseLost", old.Err())
	}
	if next.Fence() <= old.Fence() {
		return fmt.Errorf("fence %d after expiry is not above the expired %d", next.Fence(), old.Fence())
	}
	return next.Unlock(ctx)
}

func checkOwnerOnlyRelease(ctx context.Context, c *checker) error {
	ls, err := c.clientsN(ctx, 3)
	if err != nil {
		return err
	}
	key := c.prefix + "k"
	old, next, err := expire(ctx, c, ls[0], ls[1], key)
	if err != nil {
		return err
	}
	if err := old.Unlock(ctx); !errors.Is(err, locker.ErrNotHeld) {
		return fmt.Errorf("Unlock of an expired, taken-over lease = %v, want ErrNotHeld", err)
	}
	if err := old.Refresh(ctx); !errors.Is(err, locker.ErrNotHeld) {
		return fmt.Errorf("Refresh of an expired, taken-over lease = %v, want ErrNotHeld", err)
	}
	if _, err := ls[2].TryLock(ctx, key); !errors.Is(err, locker.ErrLocked) {
		return fmt.Errorf("the old owner's Unlock released the new owner's lock: TryLock = %v", err)
	}
	return next.Unlock(ctx)
}

func checkKeepAlive(ctx context.Context, c *checker) error {
	ls, err := c.clientsN(ctx, 2)
	if err != nil {
		return err
	}
	key := c.prefix + "k"
	held, err := ls[0].Lock(ctx, key, locker.WithTTL(c.ttl))
	if err != nil {
		return err
	}
	tick := time.NewTicker(c.ttl / 4)
	defer tick.Stop()
	for end := time.Now().Add(2 * c.ttl); time.Now().Before(end); <-tick.C {
		if _, err := ls[1].TryLock(ctx, key); !errors.Is(err, locker.ErrLocked) {
			return fmt.Errorf("a kept-alive key was free to another client: TryLock = %v", err)
		}
	}
	if err := held.Err(); err != nil {
		return fmt.Errorf("kept-alive lease ended: %w", err)
	}
	return held.Unlock(ctx)
}

func checkReentry(ctx context.Context, c *checker) error {
	ls, err := c.clientsN(ctx, 2)
	if err != nil {
		return err
	}
	key := c.prefix + "k"
	me := locker.WithOwner("locker-check-" + strings.TrimSuffix(c.prefix, "/"))
	first, err := ls[0].TryLock(ctx, key, me)
	if err != nil {
		return err
	}
	second, err := ls[0].TryLock(ctx, key, me)
	if err != nil {
		return fmt.Errorf("re-entry by the same owner: %w", err)
	}
	if first.Fence() != second.Fence() {
		return fmt.Errorf("re-entry changed the fence: %d then %d", first.Fence(), second.Fence())
	}
	if err := first.Unlock(ctx); err != nil {
		return err
	}
	if _, err := ls[1].TryLock(ctx, key); !errors.Is(err, locker.ErrLocked) {
		return fmt.Errorf("TryLock after one of two Unlocks = %v, want ErrLocked", err)
	}
	return second.Unlock(ctx)
}

func checkCancellation(ctx context.Context, c *checker) error {
	ls, err := c.clientsN(ctx, 3)
	if err != nil {
		return err
	}
	key := c.prefix + "k"
	held, err := ls[0].Lock(ctx, key)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := ls[1].Lock(wctx, key); !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("Lock past its deadline = %v, want an error matching context.DeadlineExceeded", err)
	}
	return handoff(ctx, held, ls[2], "after an abandoned Lock")
}

func checkHandoff(ctx context.Context, c *checker) error {
	ls, err := c.clientsN(ctx, 2)
	if err != nil {
		return err
	}
	held, err := ls[0].Lock(ctx, c.prefix+"k", locker.WithTTL(time.Minute))
	if err != nil {
		return err
	}
	return handoff(ctx, held, ls[1], "")
}

// handoff has l wait for held's key, releases it, and expects l to get it
// within a second: by notification, not by the TTL or slow polling.
func handoff(ctx context.Context, held locker.Lease, l locker.Locker, when string) error {
	got := make(chan error, 1)
	var at time.Time
	go func() {
		lease, err := l.Lock(ctx, held.Key())
		at = time.Now()
		if err == nil {
			err = lease.Unlock(ctx)
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond) // let it begin waiting; if not yet, the check is weaker, never wrong
	released := time.Now()
	if err := held.Unlock(ctx); err != nil {
		return err
	}
	select {
	case err := <-got:
		if err != nil {
			return err
		}
		if d := at.Sub(released); d > time.Second {
			return fmt.Errorf("the waiter got the key %v after Unlock%s: is it polling?", d, when)
		}
		return nil
	case <-time.After(slack):
		return fmt.Errorf("the waiter did not get the key within %v of Unlock%s", slack, when)
	}
}

func checkInvalidInput(ctx context.Context, c *checker) error {
	l, err := c.client(ctx)
	if err != nil {
		return err
	}
	for name, key := range map[string]string{"empty": "", "513-byte": strings.Repeat("k", 513), "invalid UTF-8": c.prefix + "\xff", "NUL": c.prefix + "a\x00b"} {
		if _, err := l.TryLock(ctx, key); !errors.Is(err, locker.ErrInvalidKey) {
			return fmt.Errorf("TryLock with an %s key = %v, want ErrInvalidKey", name, err)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second, locker.MaxTTL + 1} {
		if _, err := l.Lock(ctx, c.prefix+"k", locker.WithTTL(ttl)); !errors.Is(err, locker.ErrInvalidTTL) {
			return fmt.Errorf("Lock with TTL %v = %v, want ErrInvalidTTL", ttl, err)
		}
	}
	if adm, ok := l.(locker.Admin); ok {
		if list, err := adm.List(ctx, c.prefix); err != nil || len(list) != 0 {
			return fmt.Errorf("bad input left locks behind: List = %v, %v", list, err)
		}
	}
	return nil
}

func checkAdmin(ctx context.Context, c *checker) error {
	ls, err := c.clientsN(ctx, 2)
	if err != nil {
		return err
	}
	adm, ok := ls[1].(locker.Admin)
	if !ok {
		return errors.New("this backend's Locker does not implement locker.Admin")
	}
	key := c.prefix + "k"
	held, err := ls[0].Lock(ctx, key, locker.WithTTL(c.ttl))
	if err != nil {
		return err
	}
	info, err := adm.Status(ctx, key)
	if err != nil || info.Owner != held.Owner() || info.Fence != held.Fence() {
		return fmt.Errorf("Status = %+v, %v; want owner %s, fence %d", info, err, held.Owner(), held.Fence())
	}
	if list, err := adm.List(ctx, c.prefix); err != nil || len(list) != 1 || list[0].Key != key {
		return fmt.Errorf("List = %+v, %v; want the one held key", list, err)
	}
	if err := adm.ForceUnlock(ctx, key); err != nil {
		return fmt.Errorf("ForceUnlock: %w", err)
	}
	select {
	case <-held.Done():
	case <-time.After(c.ttl + slack):
		return errors.New("the force-unlocked holder's lease did not end")
	}
	if !errors.Is(held.Err(), locker.ErrLeaseLost) {
		return fmt.Errorf("force-unlocked lease's Err = %v, want ErrLeaseLost", held.Err())
	}
	if _, err := adm.Status(ctx, key); !errors.Is(err, locker.ErrNotHeld) {
		return fmt.Errorf("Status of a released key = %v, want ErrNotHeld", err)
	}
	return nil
}
