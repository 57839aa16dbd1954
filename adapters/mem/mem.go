// Package mem is the in-process reference driver (scheme mem://): the
// shortest complete implementation of the driver seam, for tests, examples
// and as a model for a new backend. Every Locker opened on the same
// mem://NAME in one process shares one lock space (mem:// alone: the
// default space); leases expire by the local clock. It coordinates the
// goroutines of one process only.
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
	spaces   = map[string]*space{}
)

// space is one named lock space: the whole "backend".
type space struct {
	mu      sync.Mutex
	locks   map[string]*entry
	fences  map[string]uint64 // kept after a key is freed: fences never go back
	waiters map[string]map[chan struct{}]struct{}
}

// entry is one held key: its owner's holds, by hold id.
type entry struct {
	owner   string
	holds   map[string]bool
	fence   uint64
	expires time.Time
}

func spaceNamed(name string) *space {
	spacesMu.Lock()
	defer spacesMu.Unlock()
	s := spaces[name]
	if s == nil {
		s = &space{locks: map[string]*entry{}, fences: map[string]uint64{}, waiters: map[string]map[chan struct{}]struct{}{}}
		spaces[name] = s
	}
	return s
}

// memDriver implements driver.Driver, driver.Notifier and driver.Admin.
type memDriver struct{ s *space }

func newDriver(name string) *memDriver { return &memDriver{s: spaceNamed(name)} }

// live returns key's entry unless it is free or expired. Callers hold s.mu.
func (s *space) live(key string, now time.Time) *entry {
	e := s.locks[key]
	if e != nil && !now.Before(e.expires) {
		delete(s.locks, key)
		return nil
	}
	return e
}

// free drops key's entry and wakes its waiters. Callers hold s.mu.
func (s *space) free(key string) {
	delete(s.locks, key)
	for c := range s.waiters[key] {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (d *memDriver) Acquire(_ context.Context, r *driver.Request) (driver.Grant, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	e := s.live(r.Key, now)
	switch {
	case e == nil:
		s.fences[r.Key]++
		e = &entry{owner: r.Owner, holds: map[string]bool{}, fence: s.fences[r.Key]}
		s.locks[r.Key] = e
	case e.owner != r.Owner || !r.Reentrant:
		return driver.Grant{Retry: e.expires.Sub(now)}, nil
	}
	e.holds[r.ID] = true
	e.expires = later(e.expires, now.Add(r.TTL)) // a re-entry never shortens
	return driver.Grant{Hold: &hold{s: s, key: r.Key, id: r.ID, ttl: r.TTL}, Fence: e.fence}, nil
}

// Abandon drops the call's hold, should it have one: in process, a grant
// is never lost on the way, so this only undoes a grant that met Close.
func (d *memDriver) Abandon(ctx context.Context, r *driver.Request) {
	_ = (&hold{s: d.s, key: r.Key, id: r.ID}).Release(ctx)
}

// Close leaves the space as it is: other Lockers share it.
func (d *memDriver) Close(context.Context) error { return nil }

func (d *memDriver) Subscribe(_ context.Context, r *driver.Request) (<-chan struct{}, func(), error) {
	s := d.s
	c := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiters[r.Key] == nil {
		s.waiters[r.Key] = map[chan struct{}]struct{}{}
	}
	s.waiters[r.Key][c] = struct{}{}
	return c, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.waiters[r.Key], c)
		if len(s.waiters[r.Key]) == 0 {
			delete(s.waiters, r.Key)
		}
	}, nil
}

// Listening is true: subscribing costs no round trip in process.
func (d *memDriver) Listening() bool { return true }

// hold is one granted hold, named by its id in the entry.
type hold struct {
	s       *space
	key, id string
	ttl     time.Duration
}

func (h *hold) Refresh(context.Context) (time.Duration, error) {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	now := time.Now()
	e := h.s.live(h.key, now)
	if e == nil || !e.holds[h.id] {
		return 0, locker.ErrNotHeld
	}
	e.expires = later(e.expires, now.Add(h.ttl))
	return h.ttl, nil
}

func (h *hold) Release(context.Context) error {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	e := h.s.live(h.key, time.Now())
	if e == nil || !e.holds[h.id] {
		return locker.ErrNotHeld
	}
	delete(e.holds, h.id)
	if len(e.holds) == 0 {
		h.s.free(h.key)
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
