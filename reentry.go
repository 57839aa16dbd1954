package locker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/locker-go/locker/driver"
)

// Re-entry that the backend does not count (driver.Reenterer): the Locker
// counts an owner's leases on a key and lets them use one backend hold.

// reentries are a Locker's counted holds, by space, key and owner.
type reentries struct {
	mu sync.Mutex
	m  map[countKey]*counted
}

func newReentries() *reentries { return &reentries{m: map[countKey]*counted{}} }

type countKey struct {
	space      driver.Space
	key, owner string
}

// counted is one backend hold and the count of leases on it.
type counted struct {
	first driver.Reenterer // the hold of the lease that acquired it
	mode  driver.Mode
	fence uint64
	lost  context.Context
	op    slot // one backend call at a time, whichever lease makes it
	n     int  // guarded by reentries.mu
}

// countedHold is one lease's part of a counted hold.
type countedHold struct {
	set           *reentries
	k             countKey
	c             *counted
	h             driver.Hold // the driver's hold for this lease
	dropped, last bool        // guarded by reentries.mu
}

// add makes g, just granted to r, the counted hold of r's key and owner if
// the driver leaves re-entry to the Locker; it returns g's lease's hold.
func (rs *reentries) add(r *driver.Request, g driver.Grant) driver.Hold {
	first, ok := g.Hold.(driver.Reenterer)
	if !ok || !r.Reentrant {
		return g.Hold
	}
	k := countKey{r.Space, r.Key, r.Owner}
	c := &counted{first: first, mode: r.Mode, fence: g.Fence, lost: g.Lost, op: make(slot, 1), n: 1}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.m[k] = c // an earlier one is ending: its release let this grant through
	return &countedHold{set: rs, k: k, c: c, h: g.Hold}
}

// live reports whether r would re-enter a counted hold of this Locker.
func (rs *reentries) live(r *driver.Request) bool {
	if !r.Reentrant {
		return false
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.liveLocked(countKey{r.Space, r.Key, r.Owner}) != nil
}

// reenter grants r from the counted hold of its key and owner; ok is false
// when there is none (or it is gone), and r is to be acquired anew. A hold
// of the owner in another mode is ErrModeMismatch.
func (rs *reentries) reenter(ctx context.Context, r *driver.Request) (g driver.Grant, ok bool, err error) {
	if !r.Reentrant {
		return g, false, nil
	}
	k := countKey{r.Space, r.Key, r.Owner}
	rs.mu.Lock()
	c := rs.liveLocked(k)
	rs.mu.Unlock()
	if c == nil {
		return g, false, nil
	}
	if c.mode != r.Mode {
		return g, false, fmt.Errorf("%w: owner %q holds %q as %v, asks for %v", ErrModeMismatch, ownerOf(r.Owner), r.Key, c.mode, r.Mode)
	}
	if err := c.op.lock(ctx); err != nil {
		return g, false, err
	}
	defer c.op.unlock()
	if g, err = c.first.Reenter(ctx, r); err != nil || g.Hold == nil {
		return driver.Grant{}, false, err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if c.n == 0 { // its last lease let it go meanwhile
		return driver.Grant{}, false, nil
	}
	c.n++
	g.Fence, g.Lost = c.fence, c.lost
	g.Hold = &countedHold{set: rs, k: k, c: c, h: g.Hold}
	return g, true, nil
}

// liveLocked returns k's counted hold unless it is gone; it forgets one
// whose leases were lost. Callers hold rs.mu.
func (rs *reentries) liveLocked(k countKey) *counted {
	c := rs.m[k]
	if c == nil {
		return nil
	}
	if c.lost != nil && c.lost.Err() != nil {
		delete(rs.m, k)
		return nil
	}
	return c
}

// holds is info's hold count: the number of this Locker's leases on it if
// they share it, else what the driver says.
func (rs *reentries) holds(info LockInfo) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if c := rs.liveLocked(countKey{info.Space, info.Key, info.Owner}); c != nil && c.fence == info.Fence {
		return c.n
	}
	return info.Holds
}

func (h *countedHold) Refresh(ctx context.Context) (time.Duration, error) {
	if err := h.c.op.lock(ctx); err != nil {
		return 0, err
	}
	defer h.c.op.unlock()
	return h.h.Refresh(ctx)
}

// Release counts the lease out; the last releases the backend hold.
func (h *countedHold) Release(ctx context.Context) error {
	if !h.drop() {
		return nil
	}
	if err := h.c.op.lock(ctx); err != nil {
		return err
	}
	defer h.c.op.unlock()
	return h.h.Release(ctx)
}

// Expire counts the lease out; the last expires the backend hold.
func (h *countedHold) Expire(ctx context.Context) {
	e, ok := h.h.(driver.Expirer)
	if !h.drop() || !ok || h.c.op.lock(ctx) != nil {
		return
	}
	defer h.c.op.unlock()
	e.Expire(ctx)
}

// drop counts the lease out, once, and reports whether it was the last:
// the backend hold is then its to let go (again, after a failed release).
func (h *countedHold) drop() bool {
	h.set.mu.Lock()
	defer h.set.mu.Unlock()
	if !h.dropped {
		h.dropped = true
		h.c.n--
		h.last = h.c.n == 0
		if h.last && h.set.m[h.k] == h.c {
			delete(h.set.m, h.k)
		}
	}
	return h.last
}

// slot orders backend calls: a channel of capacity 1, taken by lock.
type slot chan struct{}

// lock waits for the slot, or for ctx.
func (s slot) lock(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slot) unlock() { <-s }
