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
	for _, m := range modes {
		if r.Mode != driver.Limited && m != driver.Limited || e.anyLive(m, now) == nil {
			continue // (two modes of the matrix meet by rule 3)
		}
		held := 0
		if m == driver.Limited {
			held = e.limit
		}
		if err := driver.LimitConflict(r.Key, r.Mode, m, r.Limit, held); err != nil {
			return fmt.Errorf("%w: %w", locker.ErrModeMismatch, err)
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
