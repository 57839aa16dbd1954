// Package mem is the in-process reference driver (scheme mem://): the
// shortest complete implementation of the driver seam, for tests, examples
// and as a model for a new backend. Every Locker opened on the same
// mem://NAME in one process shares one lock space (mem:// alone: the
// default space); leases expire by the local clock. It coordinates the
// goroutines of one process only.
//
// It keeps every capability of the seam: modes (driver.ModeKeeper: shared,
// intention, subtree space), batches (driver.Batcher), notification
// (driver.Notifier) and admin (driver.Admin). grant.go holds the rule by
// which a request is granted, as driver.ModeKeeper states it; a backend
// implements the same rule in its own terms (a script, a statement).
package mem

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

func init() { locker.Register("mem", Open) }

// Open returns a Locker on the lock space that mem://NAME names.
func Open(_ context.Context, u *url.URL) (locker.Locker, error) {
	if u.User != nil || u.Port() != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Opaque != "" {
		return nil, fmt.Errorf("%w: %s: want mem://NAME, with no user, port, path or query", locker.ErrInvalidURL, u.Redacted())
	}
	return New(u.Hostname()), nil
}

// New returns a Locker on the named lock space of this process.
func New(space string) locker.Locker { return locker.New(newDriver(space)) }

var (
	spacesMu sync.Mutex
	spaces   = map[string]*lockSpace{}
)

// lockSpace is one named lock space: the whole "backend".
type lockSpace struct {
	mu      sync.Mutex
	locks   map[name]*entry
	fence   uint64 // one counter: fences never go back, and rise across a subtree
	arrived uint64 // arrival order of waiters
	subs    map[name]map[chan struct{}]struct{}
	watches map[name]map[chan struct{}]struct{} // Watch's signals (watch.go)
}

// name is a key in its space.
type name struct {
	space driver.Space
	key   string
}

func spaceNamed(n string) *lockSpace {
	spacesMu.Lock()
	defer spacesMu.Unlock()
	s := spaces[n]
	if s == nil {
		s = &lockSpace{locks: map[name]*entry{}, subs: map[name]map[chan struct{}]struct{}{}, watches: map[name]map[chan struct{}]struct{}{}}
		spaces[n] = s
	}
	return s
}

// memDriver implements driver.Driver, ModeKeeper, Batcher,
// BatchRefresher, Notifier, Watcher, FenceFloorer and Admin.
type memDriver struct{ s *lockSpace }

var (
	_ driver.FenceFloorer   = (*memDriver)(nil)
	_ driver.ModeKeeper     = (*memDriver)(nil)
	_ driver.Batcher        = (*memDriver)(nil)
	_ driver.BatchRefresher = (*memDriver)(nil)
	_ driver.KeyListener    = (*memDriver)(nil)
	_ driver.Watcher        = (*memDriver)(nil)
	_ driver.Admin          = (*memDriver)(nil)
)

func newDriver(n string) *memDriver { return &memDriver{s: spaceNamed(n)} }

// KeepsModes declares that Acquire grants by driver.ModeKeeper's rule.
func (d *memDriver) KeepsModes() {}

func (d *memDriver) Acquire(_ context.Context, r *driver.Request) (driver.Grant, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	v, err := s.decide(r, now)
	if err != nil || !v.ok {
		return driver.Grant{Retry: v.retry}, err
	}
	return s.apply(r, v, now), nil
}

// AcquireBatch grants every request, or none: each is decided before any
// is applied.
func (d *memDriver) AcquireBatch(_ context.Context, rs []*driver.Request) ([]driver.Grant, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	gs := make([]driver.Grant, len(rs))
	vs := make([]verdict, len(rs))
	refused := false
	for i, r := range rs {
		v, err := s.decide(r, now)
		if err != nil {
			return nil, err
		}
		vs[i], gs[i].Retry, refused = v, v.retry, refused || !v.ok
	}
	if refused {
		return gs, nil
	}
	for i, r := range rs {
		gs[i] = s.apply(r, vs[i], now)
	}
	return gs, nil
}

// ReleaseBatch releases each hold in turn, under the space's lock: one
// "call", as one script or transaction would be.
func (d *memDriver) ReleaseBatch(ctx context.Context, hs []driver.Hold) ([]error, error) {
	for _, h := range hs {
		if h, ok := h.(*hold); !ok || h.s != d.s {
			return nil, driver.ErrSkip
		}
	}
	errs := make([]error, len(hs))
	for i, h := range hs {
		errs[i] = h.Release(ctx)
	}
	return errs, nil
}

// Abandon drops the call's place in the queue and its hold, should it have
// either: in process, a grant is never lost on the way, so this only
// undoes a grant that met Close.
func (d *memDriver) Abandon(ctx context.Context, r *driver.Request) {
	s := d.s
	s.mu.Lock()
	if e := s.locks[name{r.Space, r.Key}]; e != nil && e.leave(r.ID) {
		s.changed(name{r.Space, r.Key}, e)
	}
	s.mu.Unlock()
	_ = (&hold{s: s, n: name{r.Space, r.Key}, owner: r.Owner, mode: r.Mode, id: r.ID}).Release(ctx)
}

// Close leaves the space as it is: other Lockers share it.
func (d *memDriver) Close(context.Context) error { return nil }

// Subscribe wakes the caller whenever r's key changes hands.
func (d *memDriver) Subscribe(_ context.Context, r *driver.Request) (<-chan struct{}, func(), error) {
	c, stop := d.s.listen(d.s.subs, name{r.Space, r.Key})
	return c, stop, nil
}

// Listening is true: subscribing costs no round trip in process.
func (d *memDriver) Listening() bool { return true }

// ListeningFor is true for every request, as Listening is: a driver whose
// subscriptions cost by key (driver.KeyListener) answers per request.
func (d *memDriver) ListeningFor(*driver.Request) bool { return true }

// changed wakes n's subscribers (each looks again: rule 3 of
// driver.ModeKeeper picks who gets it) and forgets an empty entry.
// Callers hold s.mu.
func (s *lockSpace) changed(n name, e *entry) {
	if e.empty() {
		delete(s.locks, n)
	}
	signal(s.subs[n])
	signal(s.watches[n])
}

// hold is one granted hold, named by its id in its holder's set.
type hold struct {
	s     *lockSpace
	n     name
	owner string
	mode  driver.Mode
	id    string
	ttl   time.Duration
}

func (h *hold) Refresh(context.Context) (time.Duration, error) {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.refresh(time.Now())
}

// RefreshBatch refreshes each hold in turn, under the space's lock: one
// "call", as one script or statement would be; ErrSkip for a hold of
// another driver.
func (d *memDriver) RefreshBatch(_ context.Context, hs []driver.Hold) ([]driver.Refreshed, error) {
	out := make([]driver.Refreshed, len(hs))
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	now := time.Now()
	for i, h := range hs {
		if h, ok := h.(*hold); ok && h.s == d.s {
			out[i].Valid, out[i].Err = h.refresh(now)
		} else {
			out[i].Err = driver.ErrSkip
		}
	}
	return out, nil
}

// refresh extends the hold by its TTL from now. Callers hold s.mu.
func (h *hold) refresh(now time.Time) (time.Duration, error) {
	hd := h.s.holder(h.n, h.owner, h.mode, now)
	if hd == nil || !hd.holds[h.id] {
		return 0, locker.ErrNotHeld
	}
	hd.expires = later(hd.expires, now.Add(h.ttl))
	return h.ttl, nil
}

func (h *hold) Release(context.Context) error {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	hd := h.s.holder(h.n, h.owner, h.mode, time.Now())
	if hd == nil || !hd.holds[h.id] {
		return locker.ErrNotHeld
	}
	delete(hd.holds, h.id)
	if len(hd.holds) == 0 {
		e := h.s.locks[h.n]
		delete(e.holders[h.mode], h.owner)
		h.s.changed(h.n, e)
	}
	return nil
}

// holder returns the live holder of n by owner in mode, or nil. Callers
// hold s.mu.
func (s *lockSpace) holder(n name, owner string, mode driver.Mode, now time.Time) *holder {
	e := s.locks[n]
	if e == nil || int(mode) >= len(e.holders) {
		return nil
	}
	hd := e.holders[mode][owner]
	if hd != nil && !now.Before(hd.expires) {
		delete(e.holders[mode], owner)
		return nil
	}
	return hd
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// RaiseFence raises the space's one counter: every key's later fences are
// above floor (a request's Floor raises it the same way, in apply).
func (d *memDriver) RaiseFence(_ context.Context, _ driver.Space, _ string, floor uint64) error {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	d.s.fence = max(d.s.fence, floor)
	return nil
}
