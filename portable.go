package locker

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
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
// leases are released. Shared, subtree and multi-key locks are built here
// from d's modes (driver.ModeKeeper) and batches (driver.Batcher); over a
// driver without modes they lock more: every lease exclusive, a subtree
// lock its whole top-level tree. If d implements driver.Admin, so does the
// Locker (locker.Admin). opts configure it as Open's do (WithLogger); an
// adapter's constructor passes its own on.
func New(d driver.Driver, opts ...ClientOption) Locker {
	p := &portable{d: d, set: newLeaseSet(), reentries: newReentries()}
	if len(opts) > 0 {
		_, o := withClientOptions(context.Background(), opts)
		p.configure(o)
	}
	p.notifier, _ = d.(driver.Notifier)
	p.batcher, _ = d.(driver.Batcher)
	p.floorer, _ = d.(driver.FenceFloorer)
	if b, ok := d.(driver.BatchRefresher); ok {
		p.set.renew = newRenewer(b, p.set)
	}
	_, p.modes = d.(driver.ModeKeeper)
	_, p.limits = d.(driver.Limiter)
	if a, ok := d.(driver.Admin); ok {
		return &adminLocker{portable: p, admin: a}
	}
	return p
}

// portable implements Locker over a driver.
type portable struct {
	d         driver.Driver
	notifier  driver.Notifier     // nil if d cannot notify
	batcher   driver.Batcher      // nil if d takes keys one at a time
	floorer   driver.FenceFloorer // nil if d cannot keep fences above a floor
	modes     bool                // d is a driver.ModeKeeper
	limits    bool                // d is a driver.Limiter
	set       *leaseSet
	reentries *reentries // holds re-entered through this Locker (driver.Reenterer)
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
	if err := p.floors(o); err != nil {
		return nil, err
	}
	if o.Subtree {
		leases, err := p.group(ctx, []string{key}, o, wait)
		if err != nil {
			return nil, ctxErr(ctx, key, err)
		}
		return leases[0], nil
	}
	space, node := p.node(key, o)
	r := p.request(space, node, p.mode(o, false), o, wait)
	g, err := p.take(ctx, r)
	var l Lease
	if err == nil && o.election {
		g = p.announce(ctx, r, g)
	}
	if err == nil {
		l, err = p.lease(key, r, g)
	}
	if err != nil && (wait || !errors.Is(err, ErrLocked)) {
		p.abandon(ctx, r)
	}
	return l, ctxErr(ctx, key, err)
}

// request is one driver request of a call with options o.
func (p *portable) request(space driver.Space, key string, mode driver.Mode, o Options, wait bool) *driver.Request {
	r := &driver.Request{
		Key: key, Owner: storedOwner(o), Mode: mode, Space: space, Reentrant: o.StableOwner, ID: rand.Text(),
		TTL: o.TTL, KeepAlive: o.KeepAlive, Wait: wait, Floor: o.FenceFloor,
	}
	if mode == driver.Limited {
		r.Limit = o.Limit
	}
	return r
}

// mode is the driver mode of a key with options o (of a subtree path's
// ancestor, with intent): Exclusive for everything on a driver without
// modes, which so locks more, never less.
func (p *portable) mode(o Options, intent bool) driver.Mode {
	switch {
	case !p.modes:
		return driver.Exclusive
	case p.limited(o):
		return driver.Limited
	case intent && o.Shared:
		return driver.IntentShared
	case intent:
		return driver.IntentExclusive
	case o.Shared:
		return driver.Shared
	}
	return driver.Exclusive
}

// abandon undoes what a failed request may have left, under a fresh,
// bounded context.
func (p *portable) abandon(ctx context.Context, r *driver.Request) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	p.d.Abandon(actx, r)
}

// granted is a live grant: the driver's grant, its Validity filled in, and
// when that validity started.
type granted struct {
	driver.Grant
	start time.Time
}

func (g granted) deadline() time.Time { return g.start.Add(g.Validity) }

// take waits for r's key (r.Wait: Lock) or makes one attempt (TryLock,
// whose refusal is an error matching ErrLocked).
func (p *portable) take(ctx context.Context, r *driver.Request) (granted, error) {
	if r.Wait {
		return p.wait(ctx, r)
	}
	g, _, err := p.try(ctx, r)
	return g, err
}

// lease wraps r's grant g of key in a lease.
func (p *portable) lease(key string, r *driver.Request, g granted) (Lease, error) {
	return newLease(p.set, leaseConfig{
		Key: key, Owner: ownerOf(r.Owner), Fence: g.Fence, TTL: r.TTL, KeepAlive: r.KeepAlive,
		Start: g.start, Validity: g.Validity, Hold: g.Hold, Lost: g.Lost,
	})
}

// try makes one Acquire; for a refusal it returns ErrLocked and how long
// to wait at most before looking again. A grant whose validity ran out
// before its reply came (a slow backend, a starved process) is given back
// and asked for again: Lock never returns a dead lease. After deadGrants
// such grants in a row, the TTL is too short for the backend's round
// trip, and try says so.
func (p *portable) try(ctx context.Context, r *driver.Request) (granted, time.Duration, error) {
	for dead := 0; ; dead++ {
		start := time.Now()
		g, err := p.acquire(ctx, r)
		switch {
		case err != nil:
			return granted{}, 0, err
		case g.Hold == nil:
			return granted{}, g.Retry, lockedError{r.Key}
		}
		if live, ok := p.live(r, g, start); ok {
			return live, 0, nil
		}
		p.giveBack(ctx, g.Hold)
		if err := ctx.Err(); err != nil {
			return granted{}, 0, err
		}
		if dead+1 == deadGrants {
			return granted{}, 0, fmt.Errorf("%w: %q: %d grants in a row arrived after their validity (TTL %v): the TTL is shorter than the backend's round trip",
				ErrInvalidTTL, r.Key, deadGrants, r.TTL)
		}
	}
}

// lockedError is a refusal of key: ErrLocked, naming the key. Formatted
// only when printed, since a waiter's every refused attempt makes one
// that only errors.Is reads (fmt.Errorf took a fifth of a contended
// Locker's CPU on the mem driver).
type lockedError struct{ key string }

func (e lockedError) Error() string { return ErrLocked.Error() + ": " + strconv.Quote(e.key) }
func (e lockedError) Unwrap() error { return ErrLocked }

// live completes g, granted to r by an attempt that began at start, and
// reports whether it is still valid.
func (p *portable) live(r *driver.Request, g driver.Grant, start time.Time) (granted, bool) {
	if !g.Start.IsZero() {
		start = g.Start
	}
	g.Validity = cmp.Or(g.Validity, r.TTL)
	live := granted{Grant: g, start: start}
	return live, live.deadline().After(time.Now())
}

// acquire is one attempt: a re-entry this Locker counts (reentry.go),
// else the driver's Acquire.
func (p *portable) acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	if g, ok, err := p.reentries.reenter(ctx, r); ok || err != nil {
		return g, err
	}
	g, err := p.d.Acquire(ctx, r)
	if err == nil && g.Hold != nil {
		g.Hold = p.reentries.add(r, g)
	}
	return g, err
}

// deadGrants is how many grants in a row may arrive already expired
// before a call gives up on its TTL.
const deadGrants = 3

// giveBack releases a hold that arrived dead, best-effort. One that a
// backend keeps beyond its deadline (driver.Expirer: an etcd entry on the
// Locker's kept-alive lease) goes to Expire if the release fails, as a
// lease's hold does at its deadline, so that the key is not left taken
// for as long as the Locker lives.
func (p *portable) giveBack(ctx context.Context, h driver.Hold) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	err := h.Release(ctx)
	if e, ok := h.(driver.Expirer); ok && err != nil && !errors.Is(err, ErrNotHeld) {
		p.set.spawn(func() {
			ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
			defer cancel()
			e.Expire(ctx)
		})
	}
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
