package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance/history"
)

// The checks of LockAll: all keys or none, never a deadlock.

// Overlapping LockAlls in opposite orders, plain and subtree, and single
// Locks across them: none deadlocks, every call recorded and checked, and
// a fenced counter per key exact.
func checkLockAllNoDeadlock(e *env) error {
	const clients, rounds = 4, 12
	ls, err := e.clientsN(clients)
	if err != nil {
		return err
	}
	k := func(s ...string) []string {
		keys := make([]string, len(s))
		for i, n := range s {
			keys[i] = e.prefix + n
		}
		return keys
	}
	sets := [][]string{k("k1", "k2", "k3"), k("k3", "k2", "k1"), k("k2", "k4", "k1"), k("k4", "k3")}
	paths := [][]string{{e.tree("a/b"), e.tree("a/c")}, {e.tree("a/c"), e.tree("a/b")}, {e.tree("a")}, {e.tree("a/b/x"), e.tree("b")}}
	rec := history.New()
	counters := map[string]*history.FencedCounter{}
	for _, set := range sets {
		for _, key := range set {
			counters[key] = &history.FencedCounter{}
		}
	}
	var wg sync.WaitGroup
	for i, l := range ls {
		c := rec.Client()
		wg.Go(func() {
			for j := range rounds {
				keys, opts := sets[(i+j)%len(sets)], []locker.Option{locker.WithTTL(10 * time.Second)}
				if j%3 == 2 {
					keys, opts = paths[(i+j)%len(paths)], append(opts, locker.Subtree())
				}
				if err := e.lockAllRound(c, l, keys, opts, counters); err != nil {
					e.error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := rec.Check(e.ctx); err != nil {
		return err
	}
	for key, c := range counters {
		if v, n := c.Exact(); v != n {
			e.errorf("%q: fenced counter %d after %d accepted writes: an update was lost", e.trimmed(key), v, n)
		}
	}
	return nil
}

// lockAllRound takes keys with one LockAll, bumps their counters, lets them go.
func (e *env) lockAllRound(c *history.Client, l locker.Locker, keys []string, opts []locker.Option, counters map[string]*history.FencedCounter) error {
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	leases, err := c.LockAll(ctx, l, keys, opts...)
	cancel()
	if err != nil {
		return fmt.Errorf("LockAll(%q): %w (a deadlock ends so)", keys, err)
	}
	for i, lease := range leases {
		if lease.Key() != keys[i] {
			e.errorf("LockAll's lease %d is %q's, want %q's", i, lease.Key(), keys[i])
		}
		if cnt := counters[keys[i]]; cnt != nil {
			v := cnt.Read()
			time.Sleep(100 * time.Microsecond)
			if !cnt.Write(lease.Fence(), v+1) {
				e.errorf("the fenced counter of %q refused fence %d", e.trimmed(keys[i]), lease.Fence())
			}
		}
	}
	for _, lease := range leases {
		if err := lease.Unlock(e.ctx); err != nil && !lost(lease, err) {
			return fmt.Errorf("Unlock(%q): %w", lease.Key(), err)
		}
	}
	return nil
}

// A LockAll that cannot take every key takes none: refused by TryLockAll,
// timed out by its ctx, or given bad keys.
func checkLockAllAtomic(e *env) error {
	ls, err := e.clientsN(3)
	if err != nil {
		return err
	}
	a, b, c := ls[0], ls[1], ls[2]
	keys := []string{e.prefix + "k4", e.prefix + "k1", e.prefix + "k3", e.prefix + "k2"}
	blocker, err := e.tryLock(b, e.prefix+"k3")
	if err != nil {
		return err
	}
	if leases, err := locker.TryLockAll(e.ctx, a, keys); !errors.Is(err, locker.ErrLocked) {
		e.errorf("TryLockAll with a key held = %v, %v; want ErrLocked", leases, err)
	}
	// Long enough to take k1 and k2 on a slow machine, and to wait at k3:
	// a harness given a long TTL says its backend is slow to answer.
	ctx, cancel := context.WithTimeout(e.ctx, max(2*time.Second, e.h.ttl()))
	leases, err := locker.LockAll(ctx, a, keys)
	cancel()
	if !errors.Is(err, locker.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		e.errorf("LockAll whose ctx ended with a key held = %v, %v; want ErrLocked and DeadlineExceeded", leases, err)
	}
	for _, bad := range [][]string{nil, {keys[0], keys[1], keys[0]}, {keys[0], ""}} {
		if leases, err := locker.LockAll(e.ctx, a, bad); !errors.Is(err, locker.ErrInvalidKey) {
			e.errorf("LockAll(%q) = %v, %v; want ErrInvalidKey", bad, leases, err)
		}
	}
	if leases, err := locker.LockAll(e.ctx, a, []string{e.tree("a"), e.tree("a/b")}, locker.Subtree()); !errors.Is(err, locker.ErrInvalidKey) {
		e.errorf("LockAll of a subtree path and one below it = %v, %v; want ErrInvalidKey", leases, err)
	}
	for _, k := range slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == e.prefix+"k3" }) {
		if err := e.tryUnlock(c, k); err != nil {
			return fmt.Errorf("after the failed LockAlls: %w", err)
		}
	}
	if err := e.countLeft(e.prefix, 1, "after the failed LockAlls"); err != nil {
		return err
	}
	if err := e.unlock(blocker); err != nil {
		return err
	}
	all, err := locker.LockAll(e.ctx, a, keys)
	if err != nil {
		return err
	}
	for i, lease := range all {
		if lease.Key() != keys[i] {
			e.errorf("lease %d is %q's, want %q's", i, lease.Key(), keys[i])
		}
		if _, err := c.TryLock(e.ctx, keys[i]); !errors.Is(err, locker.ErrLocked) {
			e.errorf("TryLock(%q) held by a LockAll = %v, want ErrLocked", e.trimmed(keys[i]), err)
		}
	}
	for _, lease := range all {
		if err := e.unlock(lease); err != nil {
			return err
		}
	}
	return e.countLeft(e.prefix, 0, "after every LockAll lease was unlocked")
}

// countLeft expects want records for keys beginning with prefix, if the
// harness can count them.
func (e *env) countLeft(prefix string, want int, when string) error {
	if e.h.Count == nil {
		return nil
	}
	// 2 × slack: a backend may reap in the background, as ZooKeeper's
	// container nodes go (an ensemble's leader every second: in a full
	// run on 2 cores, not within 3 s once).
	return eventually(2*slack, fmt.Sprintf("records other than the %d expected left %s", want, when), e.countIs(prefix, want))
}
