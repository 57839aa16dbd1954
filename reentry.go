package locker

import (
	"context"
	"sync"
	"time"

	"github.com/locker-go/locker/driver"
)

// Re-entry that the backend does not count (driver.Reenterer): the Locker
// counts an owner's leases on a key and shares one backend hold among them.

// shares are a Locker's shared holds, by key and owner.
type shares struct {
	mu sync.Mutex
	m  map[shareKey]*shared
}

type shareKey struct{ key, owner string }

// shared is one backend hold and the count of leases on it.
type shared struct {
	first driver.Reenterer // the hold of the lease that acquired it
	fence uint64
	lost  <-chan struct{}
	op    slot // one backend call at a time, whichever lease makes it
	n     int  // guarded by shares.mu
}

// share is one lease's part of a shared hold.
type share struct {
	set           *shares
	k             shareKey
	s             *shared
	h             driver.Hold // the driver's hold for this lease
	dropped, last bool        // guarded by shares.mu
}

// add makes g, just granted to r, the shared hold of r's key and owner if
// the driver leaves re-entry to the Locker; it returns g's lease's hold.
func (ss *shares) add(r *driver.Request, g driver.Grant) driver.Hold {
	first, ok := g.Hold.(driver.Reenterer)
	if !ok || !r.Reentrant {
		return g.Hold
	}
	k := shareKey{r.Key, r.Owner}
	s := &shared{first: first, fence: g.Fence, lost: g.Lost, op: make(slot, 1), n: 1}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.m[k] = s // an earlier one is ending: its release let this grant through
	return &share{set: ss, k: k, s: s, h: g.Hold}
}

// reenter grants r from the shared hold of its key and owner; ok is false
// when there is none (or it is gone), and r is to be acquired anew.
func (ss *shares) reenter(ctx context.Context, r *driver.Request) (g driver.Grant, ok bool, err error) {
	if !r.Reentrant {
		return g, false, nil
	}
	k := shareKey{r.Key, r.Owner}
	ss.mu.Lock()
	s := ss.liveLocked(k)
	ss.mu.Unlock()
	if s == nil {
		return g, false, nil
	}
	if err := s.op.lock(ctx); err != nil {
		return g, false, err
	}
	defer s.op.unlock()
	if g, err = s.first.Reenter(ctx, r); err != nil || g.Hold == nil {
		return driver.Grant{}, false, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s.n == 0 { // its last lease let it go meanwhile
		return driver.Grant{}, false, nil
	}
	s.n++
	g.Fence, g.Lost = s.fence, s.lost
	g.Hold = &share{set: ss, k: k, s: s, h: g.Hold}
	return g, true, nil
}

// liveLocked returns k's shared hold unless it is gone; it forgets one
// whose leases were lost. Callers hold ss.mu.
func (ss *shares) liveLocked(k shareKey) *shared {
	s := ss.m[k]
	if s == nil {
		return nil
	}
	select {
	case <-s.lost:
		delete(ss.m, k)
		return nil
	default:
		return s
	}
}

// holds is info's hold count: the number of this Locker's leases on it if
// they share it, else what the driver says.
func (ss *shares) holds(info LockInfo) int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s := ss.liveLocked(shareKey{info.Key, info.Owner}); s != nil && s.fence == info.Fence {
		return s.n
	}
	return info.Holds
}

func (h *share) Refresh(ctx context.Context) (time.Duration, error) {
	if err := h.s.op.lock(ctx); err != nil {
		return 0, err
	}
	defer h.s.op.unlock()
	return h.h.Refresh(ctx)
}

// Release counts the lease out; the last releases the backend hold.
func (h *share) Release(ctx context.Context) error {
	if !h.drop() {
		return nil
	}
	if err := h.s.op.lock(ctx); err != nil {
		return err
	}
	defer h.s.op.unlock()
	return h.h.Release(ctx)
}

// Expire counts the lease out; the last expires the backend hold.
func (h *share) Expire(ctx context.Context) {
	e, ok := h.h.(driver.Expirer)
	if !h.drop() || !ok || h.s.op.lock(ctx) != nil {
		return
	}
	defer h.s.op.unlock()
	e.Expire(ctx)
}

// drop counts the lease out, once, and reports whether it was the last:
// the backend hold is then its to let go (again, after a failed release).
func (h *share) drop() bool {
	h.set.mu.Lock()
	defer h.set.mu.Unlock()
	if !h.dropped {
		h.dropped = true
		h.s.n--
		h.last = h.s.n == 0
		if h.last && h.set.m[h.k] == h.s {
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
