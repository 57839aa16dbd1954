package redsync

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/locker-go/locker/driver"
)

// votes sorts the masters' replies to an acquire round, for one request.
type votes struct {
	got, nre int             // masters where the hold is ours now; of them, re-entered
	mismatch int             // masters where the owner holds the key in another mode, or Limited ones meet another mode or Limit
	limited  *limitHeld      // what the last misLimit reply said was held
	holders  map[int64]int   // who refused (see acquireScript) -> masters
	pttls    []time.Duration // how long until what refused may lapse, one per refusing master
	errs     []error         // masters that did not answer
	reFence  uint64          // largest recorded fence among re-entered masters
	newFence uint64          // fence for a fresh hold: largest counter among grants
	counted  []uint64        // what each fresh grant counted to
	// refusedOn marks the masters that refused: no undo goes there, so a
	// hold they hand the call later stands (handoff.go).
	refusedOn []bool
}

// limitHeld is a master's report of a mismatch by driver.Limiter's rule 2:
// the mode of the key's holders, and their Limit if Limited.
type limitHeld struct {
	mode  driver.Mode
	limit int
}

// errMalformed marks a master whose reply is not acquireScript's.
var errMalformed = errors.New("malformed script reply")

// sortReplies sorts the replies of an acquire round at n requests, noting
// the largest counter they show, and reports which masters granted them.
func (d *redlock) sortReplies(res []result[[]int64], n int) ([]votes, []bool) {
	for i, r := range res {
		if r.err == nil && len(r.v) != replyWidth*n+1 {
			res[i].err = errMalformed
		}
	}
	errs := nodeErrs(res)
	vs := make([]votes, n)
	for i := range vs {
		vs[i] = votes{holders: map[int64]int{}, errs: errs, refusedOn: make([]bool, len(res))}
	}
	took := make([]bool, len(res))
	for i, r := range res {
		if r.err != nil {
			continue
		}
		counter := uint64(r.v[replyWidth*n])
		d.see(counter)
		took[i] = r.v[0] == reentered || r.v[0] == granted
		for j := range vs {
			vs[j].add(r.v[replyWidth*j:replyWidth*(j+1)], counter)
			vs[j].refusedOn[i] = r.v[replyWidth*j] == refused
		}
	}
	return vs, took
}

// add counts one master's reply to the request.
func (v *votes) add(reply []int64, counter uint64) {
	switch reply[0] {
	case refused:
		v.holders[reply[2]]++
		v.pttls = append(v.pttls, time.Duration(reply[1])*time.Millisecond)
	case heldBack:
		v.pttls = append(v.pttls, 0)
	case mismatch:
		v.mismatch++
	case misLimit:
		v.mismatch++
		v.limited = &limitHeld{driver.Mode(reply[1]), int(reply[2])}
	case reentered:
		v.got++
		v.nre++
		v.reFence = max(v.reFence, uint64(reply[1]))
		v.newFence = max(v.newFence, counter+1)
	case granted:
		v.got++
		v.counted = append(v.counted, uint64(reply[1]))
		v.newFence = max(v.newFence, uint64(reply[1]))
	}
}

// fence settles the fence of h, granted by a quorum, claiming it on the
// masters where needed; an error if it could not be made durable.
func (d *redlock) fence(ctx context.Context, v *votes, reentrant bool, h *held) (uint64, error) {
	if h.mode.Intent() {
		return 0, nil // an intention holder's fence is never a lease's: none is drawn
	}
	atFence := 0 // fresh grants whose counter reached the fence
	for _, c := range v.counted {
		if c == v.newFence {
			atFence++
		}
	}
	switch {
	case v.nre >= d.quorum:
		// Re-entry: fresh grants record the hold's fence (best effort).
		if v.nre < v.got {
			h.claim(ctx, v.reFence, false)
		}
		return v.reFence, nil
	case v.nre == 0 && (atFence == len(v.counted) && len(v.errs) == 0 || atFence >= d.quorum && !reentrant):
		// A quorum of grants counted to the fence: it is durable (every
		// later grant's quorum shares a master with it, and counts past
		// it there), and no other grant has it (each master counts a
		// value once, and one that counted past it on such a master
		// cannot count to it on a whole quorum); a re-entrant owner's,
		// which may stand beside another grant of its own, also needs
		// every master's answer. Records that counted lower learn it in
		// the background; so do masters that answer after an attempt
		// ended early (taken).
		if atFence < len(v.counted) {
			d.goBG(func() { h.claim(context.Background(), v.newFence, false) })
		}
		return v.newFence, nil
	default:
		return d.claimFence(ctx, v.newFence, h)
	}
}

// errClaimRace: the fence claims of a grant kept meeting other grants'
// until its validity ran out.
var errClaimRace = errors.New("redlock: other grants of the key kept claiming the fence")

// claimFence raises the counters to fence f and records it as h's on a
// quorum: f, or a fence above it if another grant of the key had it. A
// claim that another grant's beat starts above what it saw; each round,
// the largest claim of those racing wins, so readers granted together
// settle one or more a round, and claims go on until ctx ends (settle:
// the grant's validity). A fixed number of tries left a crowd of readers
// refused with none but readers there.
func (d *redlock) claimFence(ctx context.Context, f uint64, h *held) (uint64, error) {
	for ctx.Err() == nil {
		res := h.claim(ctx, f, true)
		ours, beaten, above := 0, 0, f
		for _, r := range res {
			if r.err != nil || len(r.v) < 3 {
				continue
			}
			d.see(uint64(r.v[2]))
			switch r.v[0] {
			case 1:
				ours++
			case 2:
				beaten++
				above = max(above, uint64(r.v[1]), uint64(r.v[2]))
			}
		}
		switch {
		case ours >= d.quorum:
			return f, nil
		case ours+beaten < d.quorum:
			return 0, d.outcome(res, 1, 2)
		}
		f = above + 1
	}
	return 0, errClaimRace
}

// retryIn is how long a refused waiter may wait without a notification:
// until enough of what refused it lapses for a quorum to be free.
func (d *redlock) retryIn(r *driver.Request, v *votes, took time.Duration) time.Duration {
	var retry time.Duration // a split vote, or time ran out: try again at once
	if need := d.quorumOf(r.Mode, r.Limit) - v.got; need > 0 && need <= len(v.pttls) {
		slices.Sort(v.pttls)
		retry = max(v.pttls[need-1], 0)
	}
	key, most := hubKey(nameOf(r), r.Mode), 0
	for a, n := range v.holders {
		most = max(most, n)
		if a > 0 && d.news.announced(key, strconv.FormatInt(a, 10)) {
			// Its release was heard: it is on its way to every master.
			retry = 0
		}
	}
	switch {
	case most+len(v.errs) < d.quorum:
		// A split vote, taken back by all: nobody will announce a
		// release, so a random pause lets one contender go first.
		retry = time.Duration(rand.Int64N(int64(2*took) + 1))
	case d.news.releasedSince(key, time.Now().Add(-2*took)):
		// A release heard as the attempt ran may not have reached every
		// master it asked (a shared group's release names nobody), and
		// its copies wake nobody twice: look again shortly.
		retry = min(retry, time.Duration(rand.Int64N(int64(2*took)+1)))
	}
	return retry
}

// see raises the largest counter value this driver has seen.
func (d *redlock) see(c uint64) {
	for {
		old := d.counted.Load()
		if c <= old || d.counted.CompareAndSwap(old, c) {
			return
		}
	}
}
