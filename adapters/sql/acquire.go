package sql

import (
	"cmp"
	"context"
	"fmt"
	"sync/atomic"
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
	waited  time.Time     // the start of its last attempt that found it waiting (handoff.go)
	// placeHeard: when the reply to MySQL's last place-only statement
	// came (placeOnce); stray: a hand-off taken since may have come
	// before that statement, which then put the call back in the queue
	placeHeard time.Time
	stray      bool
	// modalPlace: the modal path gave the call a place (Abandon leaves it)
	modalPlace bool
	raised     bool // the call's Floor was raised to (floor.go)
	refused    bool // an attempt of the call was refused
	parkable   bool // MySQL: the last refusal is one that a release ends by interrupting a park
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
// A grant is valid for the TTL in whole milliseconds less the database
// clock's tick (valid).
func (d *sqlDriver) Acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	g, err := d.acquire(ctx, r)
	if g.Hold != nil && g.Validity == 0 {
		g.Validity = d.valid(r.TTL)
	}
	return g, err
}

// valid is how long a hold's record in the database outlives, at least,
// any moment before its statement ran, for a TTL: its expiry is the
// database clock at that statement, which counts whole ticks, plus the
// TTL in whole milliseconds, as the statements send it; so up to a tick
// less than that from the statement's moment. Counted from the call's
// start (or a waiter's attempt that found it waiting, for a hand-off), a
// lease then never outlives its record, so that nobody is granted the key
// while its holder still counts it its own. A TTL no longer than that
// leaves a validity of a nanosecond, a grant dead on arrival, which the
// Locker answers with ErrInvalidTTL.
func (d *sqlDriver) valid(ttl time.Duration) time.Duration {
	return max(ttl.Truncate(time.Millisecond)-d.tick, time.Nanosecond)
}

func (d *sqlDriver) acquire(ctx context.Context, r *driver.Request) (g driver.Grant, err error) {
	if r.Space == driver.Subtree && d.openTree != nil { // to the tree driver
		t, err := d.treeDriver(ctx)
		if err != nil {
			return driver.Grant{}, err
		}
		return t.Acquire(ctx, r)
	}
	c := callOf(r)
	if g, ok := d.handedOff(r, c); ok {
		return g, d.settle(ctx, r, c)
	}
	if r.Floor > 0 && !c.raised {
		if err := d.raiseFor(ctx, r); err != nil {
			return driver.Grant{}, err
		}
	}
	once, token := d.acquireOnce, d.token(r)
	if d.modal(r) {
		once, token = acquireModal, modalToken(r)
	}
	if d.poll && !r.Reentrant && d.local.behindAs(r.Key, r.ID, r.Mode, r.Limit) {
		// Refused here: a release here wakes the first waiter, and only
		// the first polls. (A WithOwner call goes to the database: it may
		// be a re-entry, which waits for nobody.) A place in the
		// database's queue is kept, a TTL/3 apart, with no claim (the
		// modal path's claim is as cheap as its place).
		switch left := r.TTL/3 - time.Since(c.placed); {
		case token == "":
			return driver.Grant{Retry: r.TTL / 3}, nil
		case left > 0:
			return driver.Grant{Retry: left}, nil
		}
		if !d.modal(r) {
			once = d.placeOnce
		}
	}
	start := time.Now()
	g, err = d.attempt(ctx, r, c, once)
	switch {
	case err != nil:
		return driver.Grant{}, err
	case g.Hold != nil:
		c.mayHold = true // should the call fail after all (Close came first)
		d.handoffs.held(r.ID, g.Fence, d.hub.Waiting)
		return g, d.settle(ctx, r, c)
	}
	c.refused = true
	if token != "" && d.handoffs != nil {
		c.waitedSince(start)
	}
	if r.Reentrant && !d.modal(r) {
		if err := d.mismatch(ctx, r); err != nil {
			return driver.Grant{}, err
		}
	}
	return d.pace(r, c, g, token), nil
}

// attempt runs once, retrying transient errors, unless a release hands
// r the key while it waits for the process's gate (handoff.go). A
// statement on its way as ctx ends is answered before the call gives up,
// if the backend answers within the grace (landing); a hold that came
// after ctx ended is the call's to give back (Abandon), as Lock then
// returns ctx's error.
func (d *sqlDriver) attempt(ctx context.Context, r *driver.Request, c *call, once onceFunc) (g driver.Grant, err error) {
	err = d.retry(ctx, func(ctx context.Context) (err error) {
		if hg, ok := d.handedOff(r, c); ok {
			g = hg
			return nil
		}
		lctx, stop := landing(ctx, cmp.Or(d.grace, landingGrace))
		defer stop()
		g, err = once(lctx, d, r)
		return err
	}, &c.mayHold)
	if err == nil && g.Hold != nil && ctx.Err() != nil {
		c.mayHold = true
		return driver.Grant{}, fmt.Errorf("locker/sql: %w (the key was granted as it ended)", ctx.Err())
	}
	return g, err
}

// onceFunc is one attempt of a request (dialect.acquireOnce, and the
// modal path's).
type onceFunc = func(ctx context.Context, d *sqlDriver, r *driver.Request) (driver.Grant, error)

// pace sets when a refused call looks again.
func (d *sqlDriver) pace(r *driver.Request, c *call, g driver.Grant, token string) driver.Grant {
	if d.modal(r) {
		// A reader refused here while this process's gate keeps the key's
		// name only to poll (MySQL): the waiter before it is another
		// process's, whose gate may be watching for the name, and the
		// release that admits it may come from a third process, which
		// holds no name to pass. Pass it on now, as the Exclusive path
		// does when it finds the key free with another's waiter first.
		d.gates.pass(r.Key)
	}
	// Retry 0: the key came free with nobody ahead (a release that raced
	// our queueing, its NOTIFY missed): look again at once.
	if token != "" {
		g.Retry = min(g.Retry, r.TTL/3) // look again in time to keep our place
	}
	switch {
	case d.gates.quiet(r.Key, c.parkable):
		c.backoff = pollMin // a release will wake it; should it poll again, from the start
	case d.poll && d.local.polls(r.Key, r.ID):
		if g.Retry <= 0 || g.Retry > c.backoff {
			g.Retry = c.backoff
		}
		c.backoff = min(2*c.backoff, pollMax)
	}
	return g
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
	if r.Space == driver.Subtree && d.openTree != nil { // to the tree driver
		if t, err := d.treeDriver(ctx); err == nil {
			t.Abandon(ctx, r)
		}
		return
	}
	if callOf(r).modalPlace {
		d.leaveModal(ctx, r)
	}
	if t := d.token(r); t != "" && !d.modal(r) {
		var notified int
		_ = d.row(ctx, d.q.leave, []any{r.Key, t}, &notified)
	}
	if _, handed := d.handoffs.take(r.ID); handed || callOf(r).mayHold {
		_ = (&hold{d: d, key: r.Key, owner: r.Owner, id: r.ID, mode: r.Mode}).Release(ctx) // fence 0: any
	}
}

// Subscribe listens for the call's turn, by its ID: Postgres wakes the
// first waiter of its queue by its token (the ID), and where waiters poll,
// notify wakes the first of this process's (see localQueue).
func (d *sqlDriver) Subscribe(ctx context.Context, r *driver.Request) (<-chan struct{}, func(), error) {
	if r.Space == driver.Subtree && d.openTree != nil { // to the tree driver
		t, err := d.treeDriver(ctx)
		if err != nil {
			return nil, nil, err
		}
		return t.Subscribe(ctx, r)
	}
	wake, stop, err := d.hub.Subscribe(ctx, r.ID)
	if err != nil {
		return nil, nil, err
	}
	if d.poll {
		d.local.join(r)
	}
	return wake, func() {
		stop()
		if d.poll {
			// The next waiter here is first now: it polls, unless the key
			// is this call's alone (its release here will wake the next).
			// A shared grant admits the next too, if compatible: wake it.
			// A Limited grant's transaction woke those it admits: the
			// next only polls.
			switch first := d.local.leave(r.Key, r.ID); {
			case first && callOf(r).mayHold && r.Mode == driver.Limited:
				d.hub.Notify(d.local.first(r.Key))
			case first && (!callOf(r).mayHold || r.Mode != driver.Exclusive):
				d.notify(r.Key)
			}
			if d.local.first(r.Key) == "" {
				d.gates.left(r.Key)
			}
		}
		if d.handoffs.stopped(r.ID) {
			// Made as the call gave up, or after its grant: Abandon, if
			// the call failed, releases it (a grant is taken by then).
			callOf(r).mayHold = true
		}
	}, nil
}

// Listening is whether the process's LISTEN connection is up (Postgres):
// then a Lock's first attempt may take its place in the queue at once (a
// waiter that is late to queue lets readers in before it). Else false: an
// uncontended Lock starts no LISTEN.
func (d *sqlDriver) Listening() bool { return d.listening != nil && d.listening() }

// ListeningFor is Listening, or, on MySQL, whether r's key is hot here
// (mysql_hot.go): its Subscribe costs no round trip, and its first attempt
// then takes its place before it claims.
func (d *sqlDriver) ListeningFor(r *driver.Request) bool {
	return d.Listening() || d.gates.isHot(r.Key, r.TTL/3)
}

// hold is one granted hold's calls (driver.Hold and driver.Expirer), each
// matching the row by key, owner, fence and hold id.
type hold struct {
	d              *sqlDriver
	key, owner, id string
	fence          uint64
	ttl            time.Duration
	mode           driver.Mode // not Exclusive: the modal path keeps it
	waited         bool        // granted after waiting: others may wait behind it (MySQL's release)
	// wrote is when (unix ns) the row's expiry was last set for this hold
	// at the latest: its grant or renewal had come back. By then plus the
	// TTL and a tick, the row has lapsed unless another hold keeps it (or
	// a renewal whose reply was lost).
	wrote atomic.Int64
}

// written records that h's row's expiry was set for h by now, and
// returns h.
func (h *hold) written() *hold {
	h.wrote.Store(time.Now().UnixNano())
	return h
}

// lapsesBy is when h's row has lapsed, by this clock, unless another
// hold of its owner keeps it: the TTL after h's last write came back, and
// a tick of the database's clock.
func (h *hold) lapsesBy() time.Time {
	return time.Unix(0, h.wrote.Load()).Add(h.ttl + h.d.tick)
}

// The hold's one-attempt calls: the dialect's for an Exclusive hold, the
// modal path's for the others.
func (h *hold) refreshOnce() func(context.Context, *hold) (bool, error) {
	if h.mode != driver.Exclusive {
		return refreshModal
	}
	return h.d.refreshOnce
}

func (h *hold) releaseOnce() func(context.Context, *hold) (bool, bool, error) {
	switch {
	case h.mode != driver.Exclusive:
		return releaseModal
	case h.d.handsOffHere() && h.d.local.first(h.key) != "":
		return releaseHandingOff // waiters here: hand them the key
	}
	return h.d.releaseOnce
}

func (h *hold) expireOnce() func(context.Context, *hold) (bool, error) {
	if h.mode != driver.Exclusive {
		return expireModal
	}
	return h.d.expireOnce
}

func (h *hold) Refresh(ctx context.Context) (time.Duration, error) {
	var ok bool
	if err := h.d.retry(ctx, func(ctx context.Context) (err error) {
		ok, err = h.refreshOnce()(ctx, h)
		return err
	}, nil); err != nil {
		return 0, err
	}
	if !ok {
		h.d.notify(h.key) // the row is not ours: no release of ours will wake the waiters
		return 0, locker.ErrNotHeld
	}
	h.written()
	return h.d.valid(h.ttl), nil
}

func (h *hold) Release(ctx context.Context) error {
	// Its mark goes once the release is done: a hand-over of its grant
	// coming meanwhile (MySQL: foundOwn) would take it for an orphan's,
	// and release it beside this release, which one of the two then
	// finds not held.
	defer h.d.handoffs.forget(h.id)
	var ok, freed, ambiguous bool
	err := h.d.retry(ctx, func(ctx context.Context) (err error) {
		ok, freed, err = h.releaseOnce()(ctx, h)
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

// expireRetry is Expire's pause after a look that failed, and
// expireGrace how long past the row's own expiry it goes on failing
// before Expire gives up (the row lapses by itself; a Close waits).
const (
	expireRetry = 10 * time.Millisecond
	expireGrace = 100 * time.Millisecond
)

// Expire deletes the expired row, so an expired lock leaves none behind,
// and wakes the waiters. The row lapses by the database's clock after the
// lease's Deadline: up to a tick (valid), and later by the time its grant's
// or renewal's statement took after the call began, by lapsesBy at the
// latest. Expire looks a tick after the Deadline and, while the row is
// there still, when the row says it lapses (or shortly, after a look that
// failed), and once more after lapsesBy at the latest: a row that
// outlives that is kept by its owner's other holds (or by a renewal whose
// reply was lost). So under load, when a statement took long, it waits as
// long as the row lives; and a Close, which waits for it, no longer. A
// row that lives more than half its TTL yet is not lapsing (a grant given
// back unused): one look. (Before, Expire gave up 100 ms past the
// Deadline, and missed the row's own time left, which for an Exclusive
// hold Status reports as the lock's, not in Holders.)
func (h *hold) Expire(ctx context.Context) {
	wait, missed, zero := h.d.tick, 0, 0
	for {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
		by := h.lapsesBy()
		late := !time.Now().Before(by) // this look comes after the row's own expiry
		var deleted bool
		err := h.d.retry(ctx, func(ctx context.Context) (err error) {
			deleted, err = h.expireOnce()(ctx, h)
			return err
		}, nil)
		switch {
		case err == nil && deleted:
			h.d.notify(h.key)
			return
		case err == nil && late, time.Until(by) > h.ttl/2:
			return // kept by another hold, or gone; or not lapsing yet (a grant given back)
		case err != nil && time.Since(by) > expireGrace:
			return // the database fails us: the row lapses by itself
		}
		left, there, lerr := h.rowLeft(ctx)
		switch {
		case err != nil || lerr != nil:
			wait = expireRetry
		case !there && missed == 2:
			return // gone
		case !there: // lapsed by Status's count (whole ms) before the delete's, or gone
			wait, missed = time.Millisecond, missed+1
		case left == 0 && zero > 0: // the database's clock is behind ours: look less often
			wait = expireRetry
		case left == 0:
			wait, zero = time.Millisecond, 1 // Status counts whole ms
		default:
			wait = left + time.Millisecond
		}
		if err == nil && lerr == nil {
			wait = min(wait, max(time.Until(by), 0)+time.Millisecond) // a last look past by
		}
	}
}

// rowLeft is how long h's row says it lives yet, and whether it is there
// (its owner and fence), as Status reads it.
func (h *hold) rowLeft(ctx context.Context) (left time.Duration, there bool, err error) {
	infos, err := h.d.infos(ctx, driver.Plain, h.d.q.status, h.d.mq.infoSharedByKey, h.key)
	if err != nil {
		return 0, false, err
	}
	for _, in := range infos {
		hs := in.Holders
		if in.Mode == driver.Exclusive { // its holder is the info's own
			hs = []driver.Holder{{Owner: in.Owner, Fence: in.Fence, Expires: in.Expires}}
		}
		for _, x := range hs {
			if x.Owner == h.owner && x.Fence == h.fence {
				return max(time.Until(x.Expires), 0), true, nil
			}
		}
	}
	return 0, false, nil
}

// place records r's place in the database's queue (seq, in the queue's
// order) in this process's queue, waking the waiter that is first there
// now: it is the one to poll.
func (d *sqlDriver) place(r *driver.Request, seq uint64) {
	if first := d.local.place(r.Key, r.ID, seq); first != "" {
		d.hub.Notify(first)
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
