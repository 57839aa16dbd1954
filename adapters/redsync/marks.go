package redsync

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/locker-go/locker/driver"
)

// Waiting marks: nothing queues on Redlock's masters, so a Lock that
// waits (driver.Request.Queue) leaves a mark of its mode on them at each
// refused attempt instead, which lapses a TTL after the last (an attempt
// comes at least every TTL/3). A request that is incompatible with a mark
// placed before it is refused (driver.ModeKeeper's rule 3), so that a
// waiting writer keeps new readers out. "Before" is by the call's stamp:
// the client's clock (µs) at its first queued attempt, sent to every
// master, so that marks stand in the same order on all of them.

// callState is a call's driver state, kept between its attempts.
type callState struct {
	last   time.Duration // how long the last attempt took
	stamp  int64         // the call's place among waiters; 0 until it queues
	marked time.Time     // when its marks were last placed; zero: place them
	pend   pending       // the hold the last refused attempt pended, if any
	// pended: the hold ids the call's attempts pended for a hand-off
	// (handoff.go), the last pendedKept of them; unmarked: a release of
	// a hold of the call took its marks (place them again).
	pended   []string
	unmarked atomic.Bool
}

// pendedKept is how many of its pended hold ids a call keeps: a master
// hands the last one it was sent, almost always one of the last few (a
// master its attempts keep missing for 64 of them, which then hands an
// older one, keeps that hold until it lapses).
const pendedKept = 64

// What acquireScript's queue argument says of a request.
const (
	notQueued = iota // it comes after every waiter
	queued           // its place is its stamp
	remark           // and a refusal (re)places its mark
)

// queueArgs is how an attempt's requests queue.
type queueArgs struct {
	stamp int64
	queue int
	pend  string     // the hold id a refusal pends for a hand-off; "": none
	st    *callState // with pend: the call's state
}

// queue is the queueing of r's next attempt: its marks are renewed
// every TTL/3, so they never lapse while it waits.
func (st *callState) queue(r *driver.Request) queueArgs {
	var q queueArgs
	if !r.Queue {
		return q
	}
	if st.stamp == 0 { // not subscribed (Subscribe stamps it)
		st.stamp = time.Now().UnixMicro()
	}
	q.stamp, q.queue = st.stamp, queued
	if st.unmarked.Swap(false) || time.Since(st.marked) >= r.TTL/3 {
		q.queue = remark
	}
	if handsOff(r) {
		q.pend = newHoldID()
		st.pended = append(st.pended[len(st.pended)-min(len(st.pended), pendedKept-1):], q.pend)
		q.st = st
	}
	return q
}

// pendedIDs names the call's pended holds for releaseScript: "|id|…|".
func (st *callState) pendedIDs() string {
	return "|" + strings.Join(st.pended, "|") + "|"
}

// attempted records an attempt begun at start with q, which votes v
// sorted. One granted somewhere, then undone, lost its marks there (a
// grant takes them): the next attempt places them again.
func (st *callState) attempted(start time.Time, q queueArgs, v *votes) {
	switch {
	case v.got > 0:
		st.marked = time.Time{}
	case q.queue == remark:
		st.marked = start
	}
}

// stateOf returns r's callState, making it on the first attempt.
func stateOf(r *driver.Request) *callState {
	st, _ := r.State.(*callState)
	if st == nil {
		st = &callState{}
		r.State = st
	}
	return st
}

// Abandon removes the marks a failed Lock may have left, telling the
// waiters behind them; a failed attempt undoes its grants itself before
// it returns. A call that asked for hand-offs also gives back whatever
// hold a release handed it (one it pended), in the same script, so that
// no hand-off lands between the two; and forgets its pending hold, lest
// the request, made again, take a hand-off heard before.
func (d *redlock) Abandon(ctx context.Context, r *driver.Request) {
	st, _ := r.State.(*callState)
	switch {
	case st == nil || st.stamp == 0:
	case len(st.pended) > 0:
		st.pend, st.marked = pending{}, time.Time{}
		d.release(ctx, []*held{d.handedHold(r, st, "")}, nil, true)
	default:
		d.unmark(ctx, r, nil, true)
	}
}

// unmark removes r's marks on the masters that on picks (nil: all),
// announcing it if announce.
func (d *redlock) unmark(ctx context.Context, r *driver.Request, on []bool, announce bool) {
	n, channel := nameOf(r), ""
	if announce {
		channel = d.channel(n)
	}
	keys := append([]string{d.anchor(n), d.markExpiries(n)}, d.allMarks(n)...)
	keys = append(keys, d.pendings(n), d.holders(n, driver.Limited))
	d.round(ctx, r.TTL, on, unmarkScript, keys, int(r.Mode), r.ID, channel)
}
