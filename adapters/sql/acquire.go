package sql

import (
	"context"
	"time"

	"github.com/locker-go/locker/driver"
)

// Backoff of a waiter that no notification may reach (SQLite across
// processes): short, since polling a local file is cheap, and bounded.
const (
	pollMin = 2 * time.Millisecond
	pollMax = 50 * time.Millisecond
)

// call is one Lock or TryLock call's state between attempts (Request.State).
type call struct {
	backoff time.Duration // the next poll interval, where poll is set
	mayHold bool          // an attempt may have left a hold: Abandon takes it back
}

func callOf(r *driver.Request) *call {
	c, _ := r.State.(*call)
	if c == nil {
		c = &call{backoff: pollMin}
		r.State = c
	}
	return c
}

// Acquire runs the acquire statement once, retrying transient errors. The
// call's ID names the hold it adds, the same through all its attempts and
// retries, so a retry after a lost reply finds its hold already there.
func (d *sqlDriver) Acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	c, token := callOf(r), d.token(r)
	var (
		fence     uint64
		held      bool
		remaining time.Duration
	)
	err := d.retry(ctx, func(ctx context.Context) (err error) {
		fence, held, remaining, err = d.d.acquire(ctx, d.db, r.Key, r.Owner, r.ID, token, r.TTL)
		return err
	}, &c.mayHold)
	switch {
	case err != nil:
		return driver.Grant{}, err
	case held:
		// Should the call fail after all (Close came first), Abandon
		// takes the hold back.
		c.mayHold = true
		h := &hold{d: d, key: r.Key, owner: r.Owner, id: r.ID, fence: fence, ttl: r.TTL}
		return driver.Grant{Hold: h, Fence: fence}, nil
	}
	// remaining 0: the key came free with nobody ahead (a release that
	// raced our queueing, its NOTIFY missed): look again at once.
	if token != "" {
		remaining = min(remaining, r.TTL/3) // look again in time to keep our place
	}
	if d.poll {
		if remaining <= 0 || remaining > c.backoff {
			remaining = c.backoff
		}
		c.backoff = min(2*c.backoff, pollMax)
	}
	return driver.Grant{Retry: remaining}, nil
}

// token is the call's place in the key's queue: its ID once it listens
// for its turn (Postgres with LISTEN), else "" (no queue).
func (d *sqlDriver) token(r *driver.Request) string {
	if r.Queue && !d.poll {
		return r.ID
	}
	return ""
}

// Abandon leaves the queue, so a Lock that gives up delays no one, and
// takes back the call's hold should an attempt have landed after its
// caller gave up: else the row would keep the key until its TTL. The hold
// id makes this safe for a WithOwner identity: its other holds, even ones
// granted meanwhile, are not touched.
func (d *sqlDriver) Abandon(ctx context.Context, r *driver.Request) {
	if t := d.token(r); t != "" {
		var notified int
		_ = d.row(ctx, d.q.leave, []any{r.Key, t}, &notified)
	}
	if callOf(r).mayHold {
		_ = (&hold{d: d, key: r.Key, owner: r.Owner, id: r.ID}).Release(ctx) // fence 0: any
	}
}

// Subscribe listens for the call's turn: by its token where the release
// wakes the first waiter (Postgres with LISTEN), else by key, woken by
// this process's releases (and the poll backoff).
func (d *sqlDriver) Subscribe(ctx context.Context, r *driver.Request) (<-chan struct{}, func(), error) {
	if d.poll {
		return d.hub.Subscribe(ctx, r.Key)
	}
	return d.hub.Subscribe(ctx, r.ID)
}

// Listening is false: a Lock's first attempt does not queue, so an
// uncontended Lock writes no queue entry and starts no LISTEN.
func (d *sqlDriver) Listening() bool { return false }
