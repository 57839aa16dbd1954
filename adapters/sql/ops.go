package sql

import (
	"context"
	"time"

	"github.com/locker-go/locker"
)

// ops is one held lease's calls to the table (lease.Ops and lease.Expirer).
// Each matches the row by key, owner and fence: an earlier lease of the
// same WithOwner identity, whose row lapsed and was retaken, has another
// fence and cannot touch the new one.
type ops struct {
	l          *sqlLocker
	key, owner string
	id         string // the hold this lease added (see dialect.acquire)
	fence      uint64
	ttl        time.Duration
}

func (o *ops) Refresh(ctx context.Context) (time.Duration, error) {
	var ok bool
	err := o.l.retry(ctx, func(ctx context.Context) (err error) {
		ok, err = o.l.d.refresh(ctx, o.l.db, o.key, o.owner, o.id, o.fence, o.ttl)
		return err
	}, nil)
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return 0, locker.ErrNotHeld
	}
	return o.ttl, nil
}

func (o *ops) Release(ctx context.Context) error {
	var ok, freed, ambiguous bool
	err := o.l.retry(ctx, func(ctx context.Context) (err error) {
		ok, freed, err = o.l.d.release(ctx, o.l.db, o.key, o.owner, o.id, o.fence)
		return err
	}, &ambiguous)
	if err != nil {
		return err
	}
	if freed && o.l.poll {
		o.l.hub.Notify(o.key) // this process's waiters; Postgres notified in SQL
	}
	if !ok && !ambiguous { // after a lost reply, the lost try did it (the hold id is gone)
		return locker.ErrNotHeld
	}
	return nil
}

// Expire deletes the row of a lease that ended lost while the row may
// still be there, so an expired lock leaves no row behind.
func (o *ops) Expire(ctx context.Context) {
	var freed bool
	err := o.l.retry(ctx, func(ctx context.Context) (err error) {
		freed, err = o.l.d.expire(ctx, o.l.db, o.key, o.owner, o.fence)
		return err
	}, nil)
	if err == nil && freed && o.l.poll {
		o.l.hub.Notify(o.key)
	}
}
