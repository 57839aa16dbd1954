package mem

import (
	"fmt"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// Semaphores (driver.Limiter): a Limited request is granted while fewer
// than its Limit owners hold the key, counting the Limited waiters queued
// before it, so that waiters are served in arrival order.

// KeepsLimits declares that Acquire grants Limited requests by the rule
// driver.Limiter states.
func (d *memDriver) KeepsLimits() {}

var _ driver.Limiter = (*memDriver)(nil)

// limitMismatch is rule 2 of driver.Limiter: a Limited request meeting
// holders in another mode or of another Limit, or another mode's request
// meeting Limited holders. Callers hold s.mu.
func (e *entry) limitMismatch(r *driver.Request, now time.Time) error {
	limited := e.anyLive(driver.Limited, now) != nil
	if r.Mode != driver.Limited {
		if limited {
			return fmt.Errorf("%w: %q is held by a Limit(%d), asked for as %v", locker.ErrModeMismatch, r.Key, e.limit, r.Mode)
		}
		return nil
	}
	if limited && e.limit != r.Limit {
		return fmt.Errorf("%w: %q is held by a Limit(%d), asked for by a Limit(%d)", locker.ErrModeMismatch, r.Key, e.limit, r.Limit)
	}
	for _, m := range modes {
		if m != driver.Limited && e.anyLive(m, now) != nil {
			return fmt.Errorf("%w: %q is held as %v, asked for by a Limit(%d)", locker.ErrModeMismatch, r.Key, m, r.Limit)
		}
	}
	return nil
}

// decideLimited is rule 3 for a Limited request r, queued at mine (or
// after every waiter). Callers hold s.mu.
func (s *lockSpace) decideLimited(e *entry, r *driver.Request, now time.Time, mine uint64) verdict {
	taken, first := 0, time.Duration(0)
	for owner, hd := range e.holders[driver.Limited] {
		if !now.Before(hd.expires) {
			delete(e.holders[driver.Limited], owner)
			continue
		}
		if left := hd.expires.Sub(now); taken == 0 || left < first {
			first = left
		}
		taken++
	}
	for _, w := range e.queue[driver.Limited] {
		if w.arrived < mine && now.Before(w.expires) {
			taken++
		}
	}
	if taken < r.Limit {
		return verdict{ok: true}
	}
	return verdict{retry: s.place(e, r, now, first)}
}
