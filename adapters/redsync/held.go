package redsync

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/backoff"
)

// held is the driver.Hold of one hold on a quorum of masters: its owner's
// holder of the key in one mode.
type held struct {
	d     *redlock
	n     name
	mode  driver.Mode
	owner string
	id    string // the hold's own id in the records: its attempt's
	// For a hold of a call that pends holds for hand-offs (handoff.go):
	// its id, so that the hold's release takes the call's marks too, lest
	// a master yet to hand it a hold do so after the release; every hold
	// it pended ("|id|…|"), which the release drops (a master may have
	// handed it another than this); its state, told its marks went.
	call   string
	pended string
	st     *callState
	fence  uint64
	ttl    time.Duration
	limit  int // a Limited hold's n, for its quorum (quorumOf)
	// released: a release of it has begun (no claim for a late grant)
	released atomic.Bool
	// late: the replies still to come to the grant's round, if it ended
	// early (see eachUntil). A release reaches a master whose reply is
	// out only after it, lest it land before the grant.
	late *replies[[]int64]
}

// Refresh extends our records on a quorum (redsync's Extend), re-recording
// the fence where a master lacks it: valid TTL − drift from the call's start.
func (h *held) Refresh(ctx context.Context) (time.Duration, error) {
	if err := h.d.outcomeAt(h.d.quorumOf(h.mode, h.limit), h.claim(ctx, h.fence, false), 1); err != nil {
		return 0, err
	}
	return h.ttl - h.d.drift(h.ttl), nil
}

// claim runs claimScript for this hold with the given fence (fresh: as a
// new grant's, which another grant of the key must not have).
func (h *held) claim(ctx context.Context, fence uint64, fresh bool) []result[[]int64] {
	d := h.d
	return d.round(ctx, h.ttl, nil, claimScript, []string{d.anchor(h.n), d.holders(h.n, h.mode), d.counterKey()},
		int(h.mode), h.owner, h.ttl.Milliseconds(), fence, h.id, fresh)
}

// Release drops this hold on every master, announcing its holder's end.
func (h *held) Release(ctx context.Context) error {
	return h.d.outcome(h.d.release(ctx, []*held{h}, nil, true), 1, 2)
}

// ReleaseBatch releases hs, holds of this driver, in one script per
// master, in their order; ErrSkip for any other hold.
func (d *redlock) ReleaseBatch(ctx context.Context, hs []driver.Hold) ([]error, error) {
	holds := make([]*held, len(hs))
	for i, h := range hs {
		x, ok := h.(*held)
		if !ok || x.d != d {
			return nil, driver.ErrSkip
		}
		holds[i] = x
	}
	res := d.release(ctx, holds, nil, true)
	errs := make([]error, len(holds))
	for i := range holds {
		errs[i] = d.outcome(nth(res, len(holds), i), 1, 2)
	}
	return errs, nil
}

// nth is the i-th of n holds' outcome on each master, as a round for that
// hold alone has it, from a round replying one integer per hold.
func nth(res []result[[]int64], n, i int) []result[[]int64] {
	one := make([]result[[]int64], len(res))
	for j, r := range res {
		one[j].err = r.err
		if r.err == nil && len(r.v) != n {
			one[j].err = errMalformed
		} else if r.err == nil {
			one[j].v = r.v[i : i+1]
		}
	}
	return one
}

var _ driver.BatchRefresher = (*redlock)(nil)

// RefreshBatch extends the holds in one script per master (see
// claimBatchScript), each on its own quorum as Refresh would; ErrSkip for
// a hold of another driver.
func (d *redlock) RefreshBatch(ctx context.Context, hs []driver.Hold) ([]driver.Refreshed, error) {
	out := make([]driver.Refreshed, len(hs))
	keys := []string{d.counterKey()}
	var args []any
	var mine []*held
	var at []int
	least := time.Duration(0)
	for i, dh := range hs {
		h, ok := dh.(*held)
		if !ok || h.d != d {
			out[i].Err = driver.ErrSkip
			continue
		}
		mine, at = append(mine, h), append(at, i)
		keys = append(keys, d.anchor(h.n), d.holders(h.n, h.mode))
		args = append(args, int(h.mode), h.owner, h.ttl.Milliseconds(), h.fence, h.id)
		if least == 0 || h.ttl < least {
			least = h.ttl
		}
	}
	if len(mine) == 0 {
		return out, nil
	}
	res := d.round(ctx, least, nil, claimBatchScript, keys, args...)
	for j, h := range mine {
		if err := d.outcomeAt(d.quorumOf(h.mode, h.limit), nth(res, len(mine), j), 1); err != nil {
			out[at[j]].Err = err
		} else {
			out[at[j]].Valid = h.ttl - d.drift(h.ttl)
		}
	}
	return out, nil
}

// release drops the holds hs on the masters that on picks (nil: all), in
// one script each, publishing their keys' releases if announce; each
// master replies an outcome per hold. Masters that did not answer are
// tried again in the background, up to 3 times spaced by the node
// timeout, lest a slow one keep a record (and its waiters) until it
// expires: dropping a hold by its id twice changes nothing.
func (d *redlock) release(ctx context.Context, hs []*held, on []bool, announce bool) []result[[]int64] {
	tell := silent
	if announce {
		tell = told
	}
	return d.dropHolds(ctx, hs, on, tell)
}

// undo is release for a failed attempt's holds, announced if a quorum
// granted them (a Limited call short of quorumOf's count, whose waiters
// and itself look again at once). An Exclusive one's undo on a minority
// is told where waiters are marked, whom the grant there kept out (or
// took the key from, a hold a release had handed the call:
// acquireScript), lest they wait out their marks' TTL/3; a master where
// nobody is marked stays quiet, so that a waiter refused by a quorum,
// its grants on the others undone, does not wake itself. A minority of
// slots goes back in silence, as ever: handed on, they would pass round
// the waiters, none holding on quorumOf's count of masters.
func (d *redlock) undo(hs []*held, on []bool, quorum bool) {
	tell := toldIfMarked
	if quorum {
		tell = told
	}
	d.dropHolds(context.Background(), hs, on, tell)
}

// telling is whom a release tells: releaseScript's channel and quiet flag.
type telling int

const (
	silent       telling = iota // nobody
	told                        // every waiter of the key
	toldIfMarked                // as told, where a waiter is marked; Exclusive holds only
)

// dropHolds is release, telling as tell says.
func (d *redlock) dropHolds(ctx context.Context, hs []*held, on []bool, tell telling) []result[[]int64] {
	keys := make([]string, 0, 1+(4+len(modes))*len(hs))
	keys = append(keys, d.counterKey())
	args := make([]any, 0, 3+5*len(hs))
	args = append(args, d.counted.Load()+1, d.handPrefix())
	for _, h := range hs {
		h.released.Store(true)
		channel := ""
		if tell == told || tell == toldIfMarked && h.mode == driver.Exclusive {
			channel = d.channel(h.n)
		}
		keys = append(keys, d.anchor(h.n), d.holders(h.n, h.mode), d.markExpiries(h.n))
		keys = append(keys, d.allMarks(h.n)...)
		keys = append(keys, d.pendings(h.n))
		id := h.id
		if h.pended != "" {
			id = h.pended
		}
		if h.st != nil {
			h.st.unmarked.Store(true)
		}
		args = append(args, int(h.mode), h.owner, id, channel, h.call)
	}
	args = append(args, tell == toldIfMarked) // the quiet flag, last
	rr := &releaseRound{d: d, hs: hs, keys: keys, args: args}
	for _, h := range hs { // the longest node timeout: no grant's reply comes later
		rr.ttl = max(rr.ttl, h.ttl)
	}
	res, late := eachUntil(ctx, d, d.nodeTimeout(rr.ttl), rr.call(on), d.releasedBy(hs), true)
	failed := failedMasters(res)
	switch {
	case late != nil: // the rest in the background
		d.goBG(func() {
			if failed := failedMasters(late.all()); failed != nil {
				rr.retry(failed)
			}
		})
	case failed != nil:
		d.goBG(func() { rr.retry(failed) })
	}
	return res
}

// releaseRound is a release of holds: its script's keys and args.
type releaseRound struct {
	d    *redlock
	hs   []*held
	ttl  time.Duration
	keys []string
	args []any
}

// call is the release's call to master i, if on picks it (nil: all).
func (rr *releaseRound) call(on []bool) func(ctx context.Context, i int, c goredis.UniversalClient) ([]int64, error) {
	return func(ctx context.Context, i int, c goredis.UniversalClient) ([]int64, error) {
		if on != nil && !on[i] {
			return nil, nil
		}
		if err := rr.afterGrants(ctx, i); err != nil {
			return nil, err
		}
		v, err := releaseScript.Run(ctx, c, rr.keys, rr.args...).Slice()
		if err != nil {
			return nil, err
		}
		return rr.d.released(v, i)
	}
}

// afterGrants waits until master i replied to the grant of every hold
// whose grant round ended before it did (see eachUntil), or never will:
// a release sent there before might land first and leave the grant held.
func (rr *releaseRound) afterGrants(ctx context.Context, i int) error {
	for _, h := range rr.hs {
		if h.late == nil {
			continue
		}
		select {
		case <-h.late.after(i):
		case <-ctx.Done():
			return errNoAnswer // tried again (retry), which waits again
		}
	}
	return nil
}

// retry sends the release again to the failed masters, up to 3 times
// spaced by the node timeout, until the driver closes.
func (rr *releaseRound) retry(failed []bool) {
	every, tries := backoff.Policy{Min: rr.d.nodeTimeout(rr.ttl), Max: rr.d.nodeTimeout(rr.ttl)}, 0
	if !backoff.Sleep(rr.d.stop, every.Min) { // the round that failed has just ended
		return
	}
	backoff.Retry(rr.d.stop, every, func(ctx context.Context) bool {
		failed, tries = failedMasters(each(ctx, rr.d, rr.d.nodeTimeout(rr.ttl), rr.call(failed))), tries+1
		return failed == nil || tries == 3
	})
}

// failedMasters marks the masters whose reply is missing; nil if none.
func failedMasters(res []result[[]int64]) []bool {
	failed := make([]bool, len(res))
	for i, r := range res {
		failed[i] = r.err != nil
	}
	if !slices.Contains(failed, true) {
		return nil
	}
	return failed
}

// releasedBy decides a release of one hold once as many masters dropped
// it as grant its mode (quorumOf: a slot, more than a quorum), so that a
// slot released is free for the next to take; nil for several holds.
func (d *redlock) releasedBy(hs []*held) func([]result[[]int64]) bool {
	if len(hs) != 1 {
		return nil
	}
	need := d.quorumOf(hs[0].mode, hs[0].limit)
	return func(res []result[[]int64]) bool {
		n := 0
		for _, r := range res {
			if r.err == nil && len(r.v) > 0 && (r.v[0] == 1 || r.v[0] == 2) {
				n++
			}
		}
		return n >= need
	}
}
