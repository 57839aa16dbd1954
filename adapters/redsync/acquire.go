package redsync

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/backoff"
)

// Acquire makes one Redlock attempt. Request.State is the call's
// callState (marks.go).
func (d *redlock) Acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	if err := d.check(r); err != nil {
		return driver.Grant{}, err
	}
	st := stateOf(r)
	if g, ok := d.handed(ctx, r, st); ok {
		return g, nil // the handed hold, or a pause for more of its copies
	}
	if st.stamp != 0 && st.last > 0 && time.Since(st.marked) < r.TTL/3 &&
		d.news.behind(hubKey(nameOf(r), r.Mode), r.Mode, st.stamp, r.ID) {
		// The last release admitted a waiter before it that excludes it:
		// it looks again at the next release, or to renew its marks.
		return driver.Grant{Retry: max(r.TTL/3-time.Since(st.marked), 0)}, nil
	}
	if st.last > 0 && st.stamp == 0 {
		// A woken crowd would split the masters: see the package doc.
		if !backoff.Sleep(ctx, rand.N(st.last)) {
			return driver.Grant{}, ctx.Err()
		}
	}
	for tries := 1; ; tries++ {
		q := st.queue(r)
		start := time.Now()
		gs, vs, err := d.attempt(ctx, []*driver.Request{r}, q)
		st.last = time.Since(start)
		st.pend = pending{}
		if err == nil {
			st.attempted(start, q, &vs[0])
			if gs[0].Hold == nil && q.pend != "" {
				st.pend = pending{id: q.pend, at: start, on: vs[0].refusedOn}
				gs[0].Retry = st.renewBy(r, gs[0].Retry)
			}
			return gs[0], nil
		}
		if !r.Wait || tries == unansweredRounds || !errors.Is(err, locker.ErrUnavailable) {
			return driver.Grant{}, err
		}
		// As Redlock says, retry after a random delay: a round a quorum
		// did not answer in time (a burst of waiters, a stalled machine)
		// is not yet an outage, and a waiting Lock rides it out.
		nt := d.nodeTimeout(r.TTL)
		if !backoff.Sleep(ctx, nt/2+rand.N(nt/2)) {
			return driver.Grant{}, errors.Join(err, ctx.Err())
		}
	}
}

// unansweredRounds is how many rounds in a row a waiting Lock makes that
// a quorum of masters leaves unanswered before it reports the backend
// unavailable: three, as database/sql tries a bad connection.
const unansweredRounds = 3

// AcquireBatch makes one Redlock attempt at every request: each master
// grants all of them or none (one script), and the batch is granted where
// a quorum granted it. Nothing queues.
func (d *redlock) AcquireBatch(ctx context.Context, rs []*driver.Request) ([]driver.Grant, error) {
	for _, r := range rs {
		if err := d.check(r); err != nil {
			return nil, err
		}
	}
	gs, _, err := d.attempt(ctx, rs, queueArgs{})
	return gs, err
}

// check refuses a request no master could grant as asked.
func (d *redlock) check(r *driver.Request) error {
	if r.TTL <= d.drift(r.TTL)+d.nodeTimeout(r.TTL) {
		return fmt.Errorf("%w: %v leaves no validity after the drift allowance and a node timeout", locker.ErrInvalidTTL, r.TTL)
	}
	if int(r.Mode) >= len(modes) || r.Space > driver.Subtree {
		return fmt.Errorf("%w: mode %v, space %v", ErrInvalidOption, r.Mode, r.Space)
	}
	if r.Mode == driver.Limited && r.Limit < 1 {
		return fmt.Errorf("%w: Limit(%d)", ErrInvalidOption, r.Limit)
	}
	return nil
}

// attempt is one Redlock round at rs (more when a fence must be made
// durable). A call that queued may have left waiting marks, and has them
// removed where it was not granted.
func (d *redlock) attempt(ctx context.Context, rs []*driver.Request, q queueArgs) ([]driver.Grant, []votes, error) {
	if err := d.raiseFor(ctx, rs...); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	hs := make([]*held, len(rs))
	for i, r := range rs {
		hs[i] = &held{d: d, n: nameOf(r), mode: r.Mode, owner: r.Owner, id: newHoldID(), ttl: r.TTL, limit: r.Limit}
		if i == 0 && q.pend != "" { // a master that refuses may yet hand the call a pended hold
			hs[0] = d.handedHold(r, q.st, q.pend)
		}
	}
	keys, args := d.acquireArgs(rs, hs, q)
	start := time.Now()
	res, late := d.roundUntil(ctx, rs[0].TTL, nil, d.grantedAlike(rs), true, acquireScript, keys, args...)
	vs, took := d.sortReplies(res, len(rs))
	// A round cut short by the caller's end grants nothing: what landed is
	// undone below, once the calls out replied.
	if vs[0].got >= d.quorumFor(rs) && ctx.Err() == nil {
		if gs, ok := d.settle(ctx, rs, hs, vs, start); ok {
			hs[0].late = late // a release waits for the others' replies there
			d.taken(rs, hs, took, q, late)
			return gs, vs, nil
		}
	}
	if late != nil { // settle failed: undo wherever the attempt landed
		res = late.all()
		vs, took = d.sortReplies(res, len(rs))
	}
	// Failed: take the attempt back, even if ctx ended, wherever it may
	// have landed (not on a refusal): the undo of a quorum is announced,
	// that of a minority to the waiters marked there (undo).
	undo := make([]bool, len(res))
	for i, r := range res {
		undo[i] = r.err != nil || took[i]
	}
	d.undo(hs, undo, vs[0].got >= d.quorum)
	gs, err := d.refusal(rs, vs, time.Since(start))
	return gs, vs, err
}

// acquireArgs are acquireScript's KEYS and ARGV for rs, whose holds, if
// granted, are hs; q is for every request (one, or a batch that queues
// not).
func (d *redlock) acquireArgs(rs []*driver.Request, hs []*held, q queueArgs) ([]string, []any) {
	keys := make([]string, 0, 1+recordKeys*len(rs))
	keys = append(keys, d.counterKey())
	args := make([]any, 0, 1+requestArgs*len(rs))
	args = append(args, d.counted.Load()+1)
	for i, r := range rs {
		keys = append(keys, d.records(nameOf(r))...)
		args = append(args, r.Owner, int(r.Mode), r.TTL.Milliseconds(), hs[i].id, r.Reentrant,
			q.queue, r.ID, q.stamp, conflicting[r.Mode], r.Limit, d.handTo(q, r))
	}
	return keys, args
}

// settle settles the fences of hs, granted by a quorum, and returns rs's
// grants; false if a fence could not be made durable or time ran out.
func (d *redlock) settle(ctx context.Context, rs []*driver.Request, hs []*held, vs []votes, start time.Time) ([]driver.Grant, bool) {
	validity := rs[0].TTL - d.drift(rs[0].TTL)
	ctx, cancel := context.WithDeadline(ctx, start.Add(validity)) // for claimFence
	defer cancel()
	errs := make([]error, len(rs))
	if len(rs) == 1 {
		hs[0].fence, errs[0] = d.fence(ctx, &vs[0], rs[0].Reentrant, hs[0])
	} else {
		var wg sync.WaitGroup
		for i := range rs {
			wg.Go(func() { hs[i].fence, errs[i] = d.fence(ctx, &vs[i], rs[i].Reentrant, hs[i]) })
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return nil, false
		}
	}
	if time.Since(start) >= validity {
		return nil, false
	}
	gs := make([]driver.Grant, len(rs))
	for i, h := range hs {
		// Valid TTL − drift from the round's start: TTL − elapsed − drift from now.
		gs[i] = driver.Grant{Hold: h, Fence: h.fence, Start: start, Validity: validity}
	}
	return gs, true
}

// taken follows a grant of rs as hs: the call's marks removed where it
// was not granted, in the background; if the round ended early (late),
// once every master replied, when also the masters that granted late
// with another counter record the hold's fence (as fence has the others
// do), unless its release has begun (which reaches them after their
// reply: see release). The take is not announced: only the first waiter
// was woken, as the release named it (an announcement to the others, a
// round of PUBLISH to every master, cost more than the attempts it saved:
// 8 writers on one key took about 10% more locks a second without).
func (d *redlock) taken(rs []*driver.Request, hs []*held, took []bool, q queueArgs, late *replies[[]int64]) {
	if late == nil {
		if q.queue != notQueued && slices.Contains(took, false) {
			d.goBG(func() { d.unmarkWhereNot(rs, took) })
		}
		return
	}
	d.goBG(func() {
		vs, took := d.sortReplies(late.all(), len(rs))
		h := hs[0]
		if h.fence > 0 && !h.released.Load() && slices.ContainsFunc(vs[0].counted, func(c uint64) bool { return c != h.fence }) {
			h.claim(context.Background(), h.fence, false)
		}
		if q.queue != notQueued {
			d.unmarkWhereNot(rs, took)
		}
	})
}

// unmarkWhereNot removes rs's marks from the masters not in took.
func (d *redlock) unmarkWhereNot(rs []*driver.Request, took []bool) {
	if !slices.Contains(took, false) {
		return
	}
	others := make([]bool, len(took))
	for j, t := range took {
		others[j] = !t
	}
	for _, r := range rs {
		d.unmark(context.Background(), r, others, false)
	}
}

// grantedAlike decides an attempt at one request, not re-entrant, once a
// quorum of masters granted it afresh with one counter: its fence is
// then settled (see fence), whatever the others reply, so the attempt
// need not wait for the slowest masters. nil for any other attempt, and
// for a Limited one, which waits for every reply: its grant needs more
// than a majority (quorumOf), which this count, a majority's, does not
// know.
func (d *redlock) grantedAlike(rs []*driver.Request) func([]result[[]int64]) bool {
	if len(rs) != 1 || rs[0].Reentrant || rs[0].Mode == driver.Limited {
		return nil
	}
	return func(res []result[[]int64]) bool {
		n, counter := 0, int64(-1)
		for _, r := range res {
			if r.err != nil || len(r.v) != replyWidth+1 {
				continue
			}
			switch {
			case r.v[0] != granted:
				continue
			case counter >= 0 && r.v[1] != counter:
				return false // counters differ: fence decides with every reply
			}
			counter, n = r.v[1], n+1
		}
		return n >= d.quorum
	}
}

// refusal is the outcome of an attempt at rs that was not granted.
func (d *redlock) refusal(rs []*driver.Request, vs []votes, took time.Duration) ([]driver.Grant, error) {
	for i, v := range vs {
		if v.mismatch >= d.quorum && v.limited != nil {
			return nil, limitMismatch(rs[i], v.limited.mode, v.limited.limit)
		}
		if v.mismatch >= d.quorum {
			r := rs[i]
			return nil, fmt.Errorf("%w: owner %q holds %q in a mode other than %v", locker.ErrModeMismatch, r.Owner, r.Key, r.Mode)
		}
	}
	if answered, q := len(d.masters)-len(vs[0].errs), d.quorumFor(rs); answered < q {
		return nil, locker.Unavailable(fmt.Errorf("redlock: %d of %d masters answered, %d needed: %w",
			answered, len(d.masters), q, errors.Join(vs[0].errs...)))
	}
	gs := make([]driver.Grant, len(rs))
	for i, r := range rs {
		gs[i].Retry = renewIn(r, d.retryIn(r, &vs[i], took))
	}
	return gs, nil
}

// renewIn bounds a queued waiter's pause so that it looks again, renewing
// its marks, well before they lapse.
func renewIn(r *driver.Request, retry time.Duration) time.Duration {
	if r.Queue {
		return min(retry, r.TTL/3)
	}
	return retry
}
