package sql

import (
	"context"
	"fmt"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// Backoff of a waiter no notification may reach (SQLite across processes).
const (
	pollMin = 2 * time.Millisecond
	pollMax = 50 * time.Millisecond
)

// call is one Lock or TryLock call's state between attempts (Request.State).
type call struct {
	backoff time.Duration // the next poll interval, where poll is set
	mayHold bool          // an attempt may have left a hold: Abandon takes it back
	placed  time.Time     // when the call's place in the queue was last kept
}

func callOf(r *driver.Request) *call {
	c, _ := r.State.(*call)
	if c == nil {
		c = &call{backoff: pollMin}
		r.State = c
	}
	return c
}

// Acquire runs the acquire statement once, retrying transient errors; the
// call's ID names its hold, so a retry after a lost reply finds it there.
func (d *sqlDriver) Acquire(ctx context.Context, r *driver.Request) (g driver.Grant, err error) {
	c := callOf(r)
	once := d.acquireOnce
	if d.poll && !r.Reentrant && d.local.behind(r.Key, r.ID) {
		// Refused here: a release here wakes the first waiter, and only
		// the first polls. (A WithOwner call goes to the database: it may
		// be a re-entry, which waits for nobody.) A place in the
		// database's queue is kept, a TTL/3 apart, with no claim.
		switch left := r.TTL/3 - time.Since(c.placed); {
		case d.token(r) == "":
			return driver.Grant{Retry: r.TTL / 3}, nil
		case left > 0:
			return driver.Grant{Retry: left}, nil
		}
		once = d.placeOnce
	}
	err = d.retry(ctx, func(ctx context.Context) (err error) {
		g, err = once(ctx, d, r)
		return err
	}, &c.mayHold)
	switch {
	case err != nil:
		return driver.Grant{}, err
	case g.Hold != nil:
		c.mayHold = true // should the call fail after all (Close came first)
		return g, nil
	}
	// Retry 0: the key came free with nobody ahead (a release that raced
	// our queueing, its NOTIFY missed): look again at once.
	if d.token(r) != "" {
		g.Retry = min(g.Retry, r.TTL/3) // look again in time to keep our place
	}
	switch {
	case d.gates.quiet(r.Key):
		c.backoff = pollMin // a release will wake it; should it poll again, from the start
	case d.poll && d.local.polls(r.Key, r.ID):
		if g.Retry <= 0 || g.Retry > c.backoff {
			g.Retry = c.backoff
		}
		c.backoff = min(2*c.backoff, pollMax)
	}
	return g, nil
}

// token is the call's place in the key's queue: its ID once it listens
// for its turn where the database queues waiters, else "" (no queue).
func (d *sqlDriver) token(r *driver.Request) string {
	if r.Queue && d.queued {
		return r.ID
	}
	return ""
}

// Abandon leaves the queue, and takes back the call's hold should an
// attempt have landed after its caller gave up; by its id, so that the
// other holds of a WithOwner identity are not touched.
func (d *sqlDriver) Abandon(ctx context.Context, r *driver.Request) {
	if t := d.token(r); t != "" {
		var notified int
		_ = d.row(ctx, d.q.leave, []any{r.Key, t}, &notified)
	}
	if callOf(r).mayHold {
		_ = (&hold{d: d, key: r.Key, owner: r.Owner, id: r.ID}).Release(ctx) // fence 0: any
	}
}

// Subscribe listens for the call's turn, by its ID: Postgres wakes the
// first waiter of its queue by its token (the ID), and where waiters poll,
// notify wakes the first of this process's (see localQueue).
func (d *sqlDriver) Subscribe(ctx context.Context, r *driver.Request) (<-chan struct{}, func(), error) {
	wake, stop, err := d.hub.Subscribe(ctx, r.ID)
	if err != nil || !d.poll {
		return wake, stop, err
	}
	d.local.join(r.Key, r.ID)
	return wake, func() {
		stop()
		// The next waiter here is first now: it polls, unless the key is
		// this call's (its release here will wake the next).
		if d.local.leave(r.Key, r.ID) && !callOf(r).mayHold {
			d.notify(r.Key)
		}
		if d.local.first(r.Key) == "" {
			d.gates.left(r.Key)
		}
	}, nil
}

// Listening is false: a Lock's first attempt does not queue, so an
// uncontended Lock writes no queue entry and starts no LISTEN.
func (d *sqlDriver) Listening() bool { return false }

// hold is one granted hold's calls (driver.Hold and driver.Expirer), each
// matching the row by key, owner, fence and hold id.
type hold struct {
	d              *sqlDriver
	key, owner, id string
	fence          uint64
	ttl            time.Duration
}

func (h *hold) Refresh(ctx context.Context) (time.Duration, error) {
	var ok bool
	if err := h.d.retry(ctx, func(ctx context.Context) (err error) {
		ok, err = h.d.refreshOnce(ctx, h)
		return err
	}, nil); err != nil {
		return 0, err
	}
	if !ok {
		h.d.notify(h.key) // the row is not ours: no release of ours will wake the waiters
		return 0, locker.ErrNotHeld
	}
	return h.ttl, nil
}

func (h *hold) Release(ctx context.Context) error {
	var ok, freed, ambiguous bool
	err := h.d.retry(ctx, func(ctx context.Context) (err error) {
		ok, freed, err = h.d.releaseOnce(ctx, h)
		return err
	}, &ambiguous)
	if err != nil {
		return err
	}
	if freed {
		h.d.notify(h.key)
	} else if !ok {
		h.d.notify(h.key)
	}
	if !ok && !ambiguous { // after a lost reply, the lost try did it (the hold id is gone)
		return locker.ErrNotHeld
	}
	return nil
}

// Expire deletes the expired row, so an expired lock leaves none behind.
func (h *hold) Expire(ctx context.Context) {
	var deleted bool
	if h.d.retry(ctx, func(ctx context.Context) (err error) {
		deleted, err = h.d.expireOnce(ctx, h)
		return err
	}, nil) == nil && deleted {
		h.d.notify(h.key)
	}
}

// notify wakes this process's first waiter for key, where waiters poll
// (Postgres LISTEN: in SQL).
func (d *sqlDriver) notify(key string) {
	d.gates.freed(key) // the next process's watcher, after the row is gone
	if d.poll {
		d.local.wake(d.hub, key)
	}
}

// Status returns the live holder of key, or ErrNotHeld.
func (d *sqlDriver) Status(ctx context.Context, _ driver.Space, key string) (driver.LockInfo, error) {
	infos, err := d.query(ctx, d.q.status, key)
	if err != nil {
		return driver.LockInfo{}, err
	}
	if len(infos) == 0 {
		return driver.LockInfo{}, fmt.Errorf("%w: %q", locker.ErrNotHeld, key)
	}
	return infos[0], nil
}

// List returns the live locks whose keys begin with prefix.
func (d *sqlDriver) List(ctx context.Context, prefix string) ([]driver.LockInfo, error) {
	return d.query(ctx, d.q.list, prefix)
}

// ForceUnlock deletes key's row whoever holds it and wakes its waiters.
func (d *sqlDriver) ForceUnlock(ctx context.Context, _ driver.Space, key string) error {
	var held bool
	if err := d.retry(ctx, func(ctx context.Context) (err error) {
		held, err = d.forceOnce(ctx, d, key)
		return err
	}, nil); err != nil {
		return err
	}
	d.notify(key)
	if !held {
		return fmt.Errorf("%w: %q", locker.ErrNotHeld, key)
	}
	return nil
}

// query runs q, an info statement, and scans its rows.
func (d *sqlDriver) query(ctx context.Context, q string, args ...any) (infos []driver.LockInfo, err error) {
	err = d.retry(ctx, func(ctx context.Context) error {
		infos = infos[:0]
		rows, err := d.db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				i  driver.LockInfo
				ms int64
			)
			if err := rows.Scan(&i.Key, &i.Owner, &i.Fence, &i.Holds, &ms); err != nil {
				return err
			}
			i.Expires = time.UnixMilli(ms)
			infos = append(infos, i)
		}
		return rows.Err()
	}, nil)
	return infos, err
}
