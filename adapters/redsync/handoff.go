package redsync

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/backoff"
)

// Hand-offs: a release hands the key to the next waiter on each master,
// so that the waiter need not spend a round of its own to take it.
//
// A waiting Exclusive call pends, with each refused attempt, the hold it
// asked for (its id, TTL and owner) beside its mark on the masters that
// refused it (acquireScript's pend). An Exclusive holder's release that
// leaves the key free there grants that hold to the first mark, if it is
// such a call's, and publishes it with the release: the hold id, the
// counter it drew and how long (by the master's clock) the hold had been
// pending. The call holds the key once it heard a quorum of masters hand
// it the hold its last attempt pended, on masters that refused that
// attempt (no undo of it goes there); its fence is settled as an
// attempt's (fence), and its grant starts when the attempt began plus
// the least time pending heard, less the drift allowance's rate: no
// master handed it before then. A call whose attempt comes first makes
// the hand-off moot: the attempt meets the call's own holder and is
// granted afresh there, even behind marks placed since, and the holds
// pended before it are never taken; an attempt that fails gives such
// masters' keys on as it undoes them (attempt). A release of the handed hold, or the call's
// end without one (Abandon), takes the call's marks in the same script,
// so that a master yet to hand the hold (its release late) hands the key
// to the next waiter instead. A waiting Limited call pends its hold too,
// its driver id naming its Limit, and a Limited holder's release hands
// its slot as an Exclusive one hands the key, where the slot is the last
// free one (handoffLimited); the call holds it on quorumOf's count of
// masters, more than a release's quorum, so later copies wake it again
// (news.heard) and it pauses for them up to handSpread (handWait).

// pending is the hold the last refused attempt of a call pended.
type pending struct {
	id string
	at time.Time // when that attempt began
	on []bool    // the masters that refused it
}

// handCopy is one master's news that it handed a hold.
type handCopy struct {
	id      string // the hold's
	master  int
	counter uint64
	pended  time.Duration // how long the hold had been pending there
	heard   time.Time
}

// handsOff reports whether r's refusals pend its hold for a hand-off: a
// queued Exclusive or Limited call with an owner of its own (its holder
// has one hold, its lease's) and no fence floor (which its attempts raise
// the counters to first).
func handsOff(r *driver.Request) bool {
	return r.Queue && (r.Mode == driver.Exclusive || r.Mode == driver.Limited) && !r.Reentrant && r.Floor == 0
}

// handNews splits a message on the driver's hand channel, "<#channel>
// <channel><news>", into the key's channel and the news; "" if malformed.
func handNews(payload string) (channel, news string) {
	n, rest, _ := strings.Cut(payload, " ")
	size, err := strconv.Atoi(n)
	if err != nil || size < 0 || size > len(rest) {
		return "", ""
	}
	return rest[:size], rest[size:]
}

// handTo is the hand-off argument of r's attempt queued as q: the id of
// the driver whose channel hears the hand-off, or "" for none; a Limited
// request's with its Limit, "<id>/<n>", as a release hands a slot only
// to a waiter of the holders' Limit (handoffLimited).
func (d *redlock) handTo(q queueArgs, r *driver.Request) string {
	switch {
	case q.pend == "":
		return ""
	case r.Mode == driver.Limited:
		return d.id + "/" + strconv.Itoa(r.Limit)
	}
	return d.id
}

// newHoldID is a random hold id, exact as a Lua number.
func newHoldID() string { return strconv.FormatInt(rand.Int64N(1<<53-1)+1, 10) }

// handed takes the key for r if a quorum of the masters that refused its
// last attempt handed it the hold that attempt pended (or, short of that
// quorum, has it pause for more copies: handWait); false if not (or
// its fence could not be made durable: the hold is given back, and the
// call attempts as before). A call whose ctx ended takes nothing, as an
// attempt cut short grants nothing: its Abandon gives the hold back.
func (d *redlock) handed(ctx context.Context, r *driver.Request, st *callState) (driver.Grant, bool) {
	p := st.pend
	if p.id == "" || ctx.Err() != nil {
		return driver.Grant{}, false
	}
	copies := d.news.handedTo(hubKey(nameOf(r), r.Mode), p.id, p.on)
	if len(copies) < d.quorumOf(r.Mode, r.Limit) {
		if wait := handWait(r, copies); wait > 0 {
			return driver.Grant{Retry: wait}, true
		}
		return driver.Grant{}, false
	}
	st.pend = pending{}
	h := d.handedHold(r, st, p.id)
	v := votes{got: len(copies)}
	least := copies[0].pended
	heard := make([]bool, len(d.masters))
	for _, c := range copies {
		d.see(c.counter)
		v.counted = append(v.counted, c.counter)
		v.newFence = max(v.newFence, c.counter)
		least = min(least, c.pended)
		heard[c.master] = true
	}
	least = max(least-time.Millisecond, 0) // the masters' clocks count whole ms
	start := p.at.Add(time.Duration(float64(least) * (1 - d.cfg.driftFactor)))
	gs, ok := d.settle(ctx, []*driver.Request{r}, []*held{h}, []votes{v}, start)
	if !ok {
		d.release(context.Background(), []*held{h}, nil, true)
		return driver.Grant{}, false
	}
	d.goBG(func() { d.unmarkUnheard(r, h, heard) })
	return gs[0], true
}

// handWait is how long r waits for more copies of a hand-off it heard,
// copies so far: a Limited call needs more masters' than a release's
// quorum, which woke it; a copy missing handSpread after the first (a
// master down or slow, or one that did not hand it the slot) leaves it to
// attempt as before, which takes its handed holds afresh.
func handWait(r *driver.Request, copies []handCopy) time.Duration {
	if r.Mode != driver.Limited || len(copies) == 0 {
		return 0
	}
	return handSpread - time.Since(copies[0].heard) // the first heard: copies keep their order
}

// handSpread is how long after a hand-off's first copy its call waits
// for the others: of 2,000 hand-offs to 8 Limited contenders, the fourth
// copy came at most 4.4 ms after the first (p99 2.5 ms).
const handSpread = 5 * time.Millisecond

// renewBy bounds the pause of r, refused with its hold pended, so that
// its next attempt renews its marks TTL/3 after they were placed (not
// after this attempt): a release hands the key only to a mark renewed
// within half its TTL.
func (st *callState) renewBy(r *driver.Request, retry time.Duration) time.Duration {
	if st.marked.IsZero() {
		return retry
	}
	return min(retry, max(r.TTL/3-time.Since(st.marked), 0))
}

// handedHold is a hold of r, which pends its holds (handsOff), as id:
// its release drops every hold r pended, and takes r's marks.
func (d *redlock) handedHold(r *driver.Request, st *callState, id string) *held {
	return &held{d: d, n: nameOf(r), mode: r.Mode, owner: r.Owner, id: id, ttl: r.TTL, limit: r.Limit,
		call: r.ID, pended: st.pendedIDs(), st: st}
}

// unmarkUnheard removes r's marks, once the masters had a node timeout
// to hand it its hold h, from those not heard to: one whose release went
// astray would keep the mark until it lapsed. A master that hands it the
// hold meanwhile has taken the mark itself; after h's release, which
// took them all, there is nothing to do.
func (d *redlock) unmarkUnheard(r *driver.Request, h *held, heard []bool) {
	if !backoff.Sleep(d.stop, d.nodeTimeout(h.ttl)) || h.released.Load() {
		return
	}
	others := make([]bool, len(heard))
	for i, ok := range heard {
		others[i] = !ok
	}
	d.unmark(context.Background(), r, others, false)
}
