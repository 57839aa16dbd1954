package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance/history"
)

// The checks of subtree locks: a lease on a path covers it and every path
// below it, by segments, in a namespace apart from plain keys.

// tryPaths expects TryLock of each path (Subtree, with opts) by l to be
// refused (want false) or granted (want true, released at once).
func (e *env) tryPaths(l locker.Locker, want bool, why string, paths []string, opts ...locker.Option) {
	for _, p := range paths {
		lease, err := l.TryLock(e.ctx, e.tree(p), append(opts, locker.Subtree())...)
		switch {
		case want && err != nil:
			e.errorf("%s: TryLock(%q, Subtree) = %v, want it granted", why, p, err)
		case want:
			_ = lease.Unlock(e.ctx)
		case !errors.Is(err, locker.ErrLocked):
			e.errorf("%s: TryLock(%q, Subtree) = %v, %v; want ErrLocked", why, p, lease, err)
		}
	}
}

// Ancestors and descendants conflict, at depth 1 and 5; siblings, paths
// that share a prefix but not a segment, and plain keys do not.
func checkSubtreePaths(e *env) error {
	a, b, err := e.two()
	if err != nil {
		return err
	}
	st := locker.Subtree()
	held, err := e.tryLock(a, e.tree("a/b"), st)
	if err != nil {
		return err
	}
	e.tryPaths(b, false, "a/b held", []string{"a", "a/b", "a/b/c", "a/b/c/d"})
	e.tryPaths(b, false, "a/b held", []string{"a", "a/b/c"}, locker.Shared())
	if err := e.noModes(); err == nil {
		e.tryPaths(b, true, "a/b held", []string{"a/bc", "a/c", "a/b-c", "a.b", "b"})
	}
	if err := e.tryUnlock(b, e.tree("a/b")); err != nil { // the plain key: another namespace
		return fmt.Errorf("plain key beside the subtree lock of the same name: %w", err)
	}
	if err := e.unlock(held); err != nil {
		return err
	}
	deep, err := e.tryLock(a, e.tree("p/1/2/3/4"), st)
	if err != nil {
		return err
	}
	e.tryPaths(b, false, "p/1/2/3/4 held", []string{"p", "p/1", "p/1/2/3", "p/1/2/3/4", "p/1/2/3/4/5/6"})
	if err := e.noModes(); err == nil {
		e.tryPaths(b, true, "p/1/2/3/4 held", []string{"p/1/2/3/5", "p/1/2/35", "p/2"})
	}
	if err := e.unlock(deep); err != nil {
		return err
	}
	e.tryPaths(b, true, "everything unlocked", []string{"a", "p"})
	for _, bad := range []string{"/a", "a/", "a//b", "/"} {
		for name, take := range calls(a) {
			if l, err := take(e.ctx, bad, st); !errors.Is(err, locker.ErrInvalidKey) {
				e.errorf("%s(%q, Subtree) = %v, %v; want ErrInvalidKey", name, bad, l, err)
			}
		}
	}
	return nil
}

// Shared subtree locks: readers of a tree and below share; a writer
// anywhere that meets them is excluded.
func checkSubtreeShared(e *env) error {
	if err := e.noModes(); err != nil {
		return err
	}
	a, b, err := e.two()
	if err != nil {
		return err
	}
	read := []locker.Option{locker.Subtree(), locker.Shared()}
	held, err := e.tryLock(a, e.tree("a/b"), read...)
	if err != nil {
		return err
	}
	e.tryPaths(b, true, "a/b read-locked", []string{"a", "a/b", "a/b/c"}, locker.Shared())
	e.tryPaths(b, false, "a/b read-locked", []string{"a", "a/b", "a/b/c/d"})
	e.tryPaths(b, true, "a/b read-locked", []string{"a/c", "a/bc"})
	below, err := e.tryLock(b, e.tree("a/b/c"), read...)
	if err != nil {
		return err
	}
	if below.Fence() <= held.Fence() {
		e.errorf("fence %d of a later shared grant below is not above %d", below.Fence(), held.Fence())
	}
	if err := e.unlock(held); err != nil {
		return err
	}
	e.tryPaths(a, false, "a/b/c read-locked", []string{"a", "a/b", "a/b/c", "a/b/c/d"})
	e.tryPaths(a, true, "a/b/c read-locked", []string{"a/b/d"})
	return e.unlock(below)
}

// A waiter for a path below a held one is woken by the release, not by
// the holder's TTL.
func checkSubtreeHandoff(e *env) error {
	a, b, err := e.two()
	if err != nil {
		return err
	}
	held, err := e.lock(a, e.tree("a"), locker.Subtree(), locker.WithTTL(time.Minute))
	if err != nil {
		return err
	}
	type acquired struct {
		at  time.Time // as Lock returned, before the Unlock
		err error
	}
	got := make(chan acquired, 1)
	go func() {
		lease, err := b.Lock(e.ctx, e.tree("a/b/c"), locker.Subtree())
		at := time.Now()
		if err == nil {
			err = lease.Unlock(e.ctx)
		}
		got <- acquired{at, err}
	}()
	time.Sleep(200 * time.Millisecond) // the waiter begins to wait; if not yet, the check is weaker, never wrong
	released := time.Now()
	if err := e.unlock(held); err != nil {
		return err
	}
	select {
	case a := <-got:
		if d := a.at.Sub(released); d > handoffWithin {
			e.errorf("handoff to a waiter below took %v: is it polling?", d)
		}
		return a.err
	case <-time.After(10 * time.Second):
		return errors.New("the waiter below did not get its path within 10s of Unlock (TTL 1m)")
	}
}

// Subtree locks under contention: 6 clients lock paths of one tree at
// depths 1 to 4, shared and exclusive, every call recorded and checked
// against paths that meet where one lies below the other.
func checkSubtreeExclusion(e *env) error {
	const clients, rounds = 6, 16
	paths := []string{"t", "t/a", "t/a/b", "t/a/b/c", "t/a/c", "t/b", "t/b/a"}
	ls, err := e.clientsN(clients)
	if err != nil {
		return err
	}
	rec := history.New()
	var wg sync.WaitGroup
	for i, l := range ls {
		c := rec.Client()
		rnd := rand.New(rand.NewPCG(uint64(i), 7))
		wg.Go(func() {
			for range rounds {
				path := e.tree(paths[rnd.IntN(len(paths))])
				opts := []locker.Option{locker.Subtree(), locker.WithTTL(10 * time.Second)}
				if rnd.IntN(2) == 0 {
					opts = append(opts, locker.Shared())
				}
				if err := e.holdBriefly(c, l, path, opts); err != nil {
					e.error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return rec.Check(e.ctx)
}

// holdBriefly takes key with opts, recorded, and lets it go.
func (e *env) holdBriefly(c *history.Client, l locker.Locker, key string, opts []locker.Option) error {
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	lease, err := c.Lock(ctx, l, key, opts...)
	cancel()
	if err != nil {
		return fmt.Errorf("Lock(%q): %w", key, err)
	}
	time.Sleep(200 * time.Microsecond)
	if err := lease.Unlock(e.ctx); err != nil && !lost(lease, err) {
		return fmt.Errorf("Unlock(%q): %w", key, err)
	}
	return nil
}

// tree is the check's subtree path p: below a top-level segment of its
// own (the prefix, its slashes replaced), so that the checks' trees
// never meet, and a path's depth is its own plus one.
func (e *env) tree(p string) string {
	return strings.ReplaceAll(strings.TrimSuffix(e.prefix, "/"), "/", ":") + "/" + p
}
