package sql

import (
	"context"
	"time"

	"github.com/locker-go/locker"
)

// hold is one granted hold's calls to the table (driver.Hold and
// driver.Expirer). Each matches the row by key, owner and fence: an earlier
// lease of the same WithOwner identity, whose row lapsed and was retaken,
// has another fence and cannot touch the new one.
type hold struct {
	d          *sqlDriver
	key, owner string
	id         string // the hold this lease added (see dialect.acquire)
	fence      uint64
	ttl        time.Duration
}

func (h *hold) Refresh(ctx context.Context) (time.Duration, error) {
	var ok bool
	if err := h.d.row(ctx, h.d.q.refresh, []any{h.key, h.owner, int64(h.fence), h.id, h.ttl.Milliseconds()}, &ok); err != nil {
		return 0, err
	}
	if !ok {
		return 0, locker.ErrNotHeld
	}
	return h.ttl, nil
}

func (h *hold) Release(ctx context.Context) error {
	var ok, freed, ambiguous bool
	err := h.d.retry(ctx, func(ctx context.Context) (err error) {
		ok, freed, err = h.d.d.release(ctx, h.d.db, h.key, h.owner, h.id, h.fence)
		return err
	}, &ambiguous)
	if err != nil {
		return err
	}
	if freed {
		h.d.notify(h.key)
	}
	if !ok && !ambiguous { // after a lost reply, the lost try did it (the hold id is gone)
		return locker.ErrNotHeld
	}
	return nil
}

// Expire deletes the row of a lease that ended lost while the row may
// still be there, so an expired lock leaves no row behind.
func (h *hold) Expire(ctx context.Context) {
	var deleted, notified int
	if h.d.row(ctx, h.d.q.expire, []any{h.key, h.owner, int64(h.fence)}, &deleted, &notified) == nil && deleted > 0 {
		h.d.notify(h.key)
	}
}

// notify wakes this process's waiters for key where no backend
// notification reaches them; Postgres with LISTEN notifies in SQL.
func (d *sqlDriver) notify(key string) {
	if d.poll {
		d.hub.Notify(key)
	}
}
