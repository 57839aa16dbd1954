package mem

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// info describes n's Shared, Exclusive or Limited holders, if it has any
// live.
// Callers hold s.mu.
func (s *lockSpace) info(n name, e *entry, now time.Time) (locker.LockInfo, bool) {
	in := locker.LockInfo{Key: n.key, Space: n.space, Mode: driver.Shared}
	for _, m := range []driver.Mode{driver.Exclusive, driver.Shared, driver.Limited} {
		for _, hd := range e.holders[m] {
			if now.Before(hd.expires) {
				in.Holders = append(in.Holders, driver.Holder{Owner: hd.owner, Fence: hd.fence, Holds: len(hd.holds), Expires: hd.expires})
				if m != driver.Shared {
					in.Mode = m
				}
			}
		}
	}
	if in.Mode == driver.Limited {
		in.Limit = e.limit
	}
	if len(in.Holders) == 0 {
		return in, false
	}
	slices.SortFunc(in.Holders, func(a, b driver.Holder) int { return cmp.Compare(a.Fence, b.Fence) })
	first := in.Holders[0]
	in.Owner, in.Fence, in.Holds, in.Expires = first.Owner, first.Fence, first.Holds, first.Expires
	for _, m := range modes {
		for _, w := range e.queue[m] {
			if now.Before(w.expires) {
				in.Waiters++
			}
		}
	}
	return in, true
}

func (d *memDriver) Status(_ context.Context, space driver.Space, key string) (locker.LockInfo, error) {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	n := name{space, key}
	if e := d.s.locks[n]; e != nil {
		if in, ok := d.s.info(n, e, time.Now()); ok {
			return in, nil
		}
	}
	return locker.LockInfo{}, fmt.Errorf("%w: %q is free", locker.ErrNotHeld, key)
}

func (d *memDriver) List(_ context.Context, prefix string) ([]locker.LockInfo, error) {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	var list []locker.LockInfo
	now := time.Now()
	for n, e := range d.s.locks {
		if in, ok := d.s.info(n, e, now); ok && strings.HasPrefix(n.key, prefix) {
			list = append(list, in)
		}
	}
	return list, nil
}

// ForceUnlock drops key's Shared, Exclusive and Limited holders.
func (d *memDriver) ForceUnlock(_ context.Context, space driver.Space, key string) error {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	n := name{space, key}
	e := d.s.locks[n]
	if e == nil {
		return fmt.Errorf("%w: %q is free", locker.ErrNotHeld, key)
	}
	_, held := d.s.info(n, e, time.Now())
	clear(e.holders[driver.Exclusive])
	clear(e.holders[driver.Shared])
	clear(e.holders[driver.Limited])
	d.s.changed(n, e)
	if !held {
		return fmt.Errorf("%w: %q is free", locker.ErrNotHeld, key)
	}
	return nil
}

// count is how many records, live holders and waiters, the keys beginning
// with prefix have in any space: what a test's Harness.Count reports.
func (s *lockSpace) count(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	c := 0
	for n, e := range s.locks {
		if !strings.HasPrefix(n.key, prefix) {
			continue
		}
		for _, m := range modes {
			for _, hd := range e.holders[m] {
				if now.Before(hd.expires) {
					c++
				}
			}
			for _, w := range e.queue[m] {
				if now.Before(w.expires) {
					c++
				}
			}
		}
	}
	return c
}
