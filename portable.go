package locker

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/locker-go/locker/driver"
)

// closeTimeout bounds Close's release of live leases and the driver's Close.
const closeTimeout = 5 * time.Second

// New returns the portable Locker over d: the one implementation of Locker
// that every adapter's constructor returns. It validates keys and options
// before d sees them, wraps each grant in a lease with its Deadline, Done,
// Err and keep-alive, waits between refused attempts for d's notification
// (driver.Notifier) or the holder's remaining TTL, and closes d once its
// leases are released. If d implements driver.Admin, so does the Locker
// (locker.Admin).
func New(d driver.Driver) Locker {
	p := &portable{d: d, set: newLeaseSet(), shares: &shares{m: map[shareKey]*shared{}}}
	p.notifier, _ = d.(driver.Notifier)
	if a, ok := d.(driver.Admin); ok {
		return &adminLocker{portable: p, admin: a}
	}
	return p
}

// portable implements Locker over a driver.
type portable struct {
	d        driver.Driver
	notifier driver.Notifier // nil if d cannot notify
	set      *leaseSet
	shares   *shares // holds re-entered through this Locker (driver.Reenterer)
}

func (p *portable) Lock(ctx context.Context, key string, opts ...Option) (Lease, error) {
	return p.call(ctx, key, opts, true)
}

func (p *portable) TryLock(ctx context.Context, key string, opts ...Option) (Lease, error) {
	return p.call(ctx, key, opts, false)
}

// call runs one Lock (wait) or TryLock. A call that fails leaves nothing
// behind: the driver abandons its queue place or a grant whose reply was
// lost, under a fresh context since ctx has likely ended.
func (p *portable) call(ctx context.Context, key string, opts []Option, wait bool) (Lease, error) {
	ctx, o, end, err := p.set.begin(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	defer end()
	r := &driver.Request{
		Key: key, Owner: o.Owner, Reentrant: o.StableOwner, ID: rand.Text(),
		TTL: o.TTL, KeepAlive: o.KeepAlive, Wait: wait,
	}
	var l Lease
	if wait {
		l, err = p.wait(ctx, r)
	} else {
		l, err = p.attempt(ctx, r)
	}
	if err != nil && (wait || !errors.Is(err, ErrLocked)) {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		p.d.Abandon(actx, r)
		cancel()
	}
	return l, ctxErr(ctx, key, err)
}

// attempt makes one Acquire; a refusal is an error matching ErrLocked.
func (p *portable) attempt(ctx context.Context, r *driver.Request) (Lease, error) {
	l, _, err := p.try(ctx, r)
	return l, err
}

// try makes one Acquire and wraps a grant in a lease; for a refusal it
// returns ErrLocked and how long to wait at most before looking again. A
// grant whose validity ran out before its reply came (a slow backend, a
// starved process) is given back and asked for again: Lock never returns
// a dead lease. After deadGrants such grants in a row, the TTL is too
// short for the backend's round trip, and try says so.
func (p *portable) try(ctx context.Context, r *driver.Request) (Lease, time.Duration, error) {
	for dead := 0; ; dead++ {
		start := time.Now()
		g, err := p.acquire(ctx, r)
		switch {
		case err != nil:
			return nil, 0, err
		case g.Hold == nil:
			return nil, g.Retry, fmt.Errorf("%w: %q", ErrLocked, r.Key)
		}
		if !g.Start.IsZero() {
			start = g.Start
		}
		if !start.Add(cmp.Or(g.Validity, r.TTL)).After(time.Now()) {
			p.giveBack(ctx, g.Hold)
			if err := ctx.Err(); err != nil {
				return nil, 0, err
			}
			if dead+1 == deadGrants {
				return nil, 0, fmt.Errorf("%w: %q: %d grants in a row arrived after their validity (TTL %v): the TTL is shorter than the backend's round trip",
					ErrInvalidTTL, r.Key, deadGrants, r.TTL)
			}
			continue
		}
		l, err := newLease(p.set, leaseConfig{
			Key: r.Key, Owner: r.Owner, Fence: g.Fence, TTL: r.TTL, KeepAlive: r.KeepAlive,
			Start: start, Validity: g.Validity, Hold: g.Hold, Lost: g.Lost,
		})
		if err != nil {
			return nil, 0, err // closed meanwhile; newLease released the hold
		}
		return l, 0, nil
	}
}

// acquire is one attempt: a re-entry this Locker counts (reentry.go),
// else the driver's Acquire.
func (p *portable) acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	if g, ok, err := p.shares.reenter(ctx, r); ok || err != nil {
		return g, err
	}
	g, err := p.d.Acquire(ctx, r)
	if err == nil && g.Hold != nil {
		g.Hold = p.shares.add(r, g)
	}
	return g, err
}

// deadGrants is how many grants in a row may arrive already expired
// before a call gives up on its TTL.
const deadGrants = 3

// giveBack releases a hold that arrived dead, best-effort.
func (p *portable) giveBack(ctx context.Context, h driver.Hold) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	_ = h.Release(ctx)
}

// Close ends waiting Lock calls, releases live leases best-effort and
// closes the driver. A second Close returns ErrClosed.
func (p *portable) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := p.set.close(ctx); err != nil {
		return err
	}
	return p.d.Close(ctx)
}

// ctxErr turns err into what a call returns once ctx has ended: ErrClosed
// when the Locker's Close ended it, else an error matching ctx.Err().
// Other errors pass through.
func ctxErr(ctx context.Context, key string, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	if errors.Is(context.Cause(ctx), ErrClosed) {
		return ErrClosed
	}
	if errors.Is(err, ctx.Err()) {
		return err
	}
	if errors.Is(err, ErrLocked) { // refused, and out of time: both are true
		return fmt.Errorf("%w: %w", err, ctx.Err())
	}
	return fmt.Errorf("locker: %q: %w", key, ctx.Err())
}
