package redsync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/go-redsync/redsync/v4"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/backoff"
)

// Outcomes of acquireScript on one master.
const (
	refused   = 0
	reentered = 1
	granted   = 2
)

// call is a Lock or TryLock call's state between its attempts (its
// Request.State): how long its last attempt took, 0 before the first.
type call struct{ last time.Duration }

// Acquire makes one Redlock attempt. TTLs that leave no validity after the
// drift allowance and a node timeout are refused before any master sees
// them.
func (d *redlock) Acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	if r.TTL <= d.drift(r.TTL)+d.nodeTimeout(r.TTL) {
		return driver.Grant{}, fmt.Errorf("%w: %v leaves no validity after the drift allowance and a node timeout", locker.ErrInvalidTTL, r.TTL)
	}
	c, _ := r.State.(*call)
	if c == nil {
		c = &call{}
		r.State = c
	}
	if c.last > 0 {
		// A release wakes every waiter of every client at once. Each waits
		// a random part of one attempt's time first, so the first of them
		// acquires on quiet masters and the others find it held, instead
		// of all splitting the masters between them.
		woke := time.Now()
		if !backoff.Sleep(ctx, rand.N(c.last)) {
			return driver.Grant{}, ctx.Err()
		}
		if ttl, ok := d.news.takenSince(r.Key, woke); ok {
			return driver.Grant{Retry: ttl}, nil
		}
	}
	start := time.Now()
	g, err := d.attempt(ctx, r, c.last > 0)
	c.last = time.Since(start)
	return g, err
}

// attempt is one Redlock round (two when the fence must be made durable).
// When another owner holds the key it refuses, with how long until enough
// of its records expire for a quorum to be free. A waiter (waited)
// announces its take to the others.
func (d *redlock) attempt(ctx context.Context, r *driver.Request, waited bool) (driver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	id := strconv.FormatInt(rand.Int64N(1<<53-1)+1, 10) // exact as a Lua number
	keys := []string{d.lockKey(r.Key), d.counterKey()}
	claim := func(ctx context.Context, fence uint64) []result[[]int64] {
		return d.round(ctx, r.TTL, claimScript, keys, r.Owner, r.TTL.Milliseconds(), fence, id)
	}
	reentrant := "0"
	if r.Reentrant {
		reentrant = "1"
	}
	start := time.Now()
	res := d.round(ctx, r.TTL, acquireScript, keys, r.Owner, r.TTL.Milliseconds(), id, reentrant, d.counted.Load()+1)
	v := d.sortReplies(res)
	if v.got >= d.quorum {
		fence, err := d.fence(ctx, &v, r.Reentrant, claim)
		if validity := r.TTL - d.drift(r.TTL); err == nil && time.Since(start) < validity {
			if waited {
				d.announceTake(r.Key, id, r.TTL, fence)
			}
			h := &held{d: d, key: r.Key, owner: r.Owner, id: id, fence: fence, ttl: r.TTL}
			// Valid TTL − drift from the round's start: TTL − elapsed − drift from now.
			return driver.Grant{Hold: h, Fence: fence, Start: start, Validity: validity}, nil
		}
	}
	// Failed: take the attempt back on every master that granted or did
	// not answer (its grant may have landed). A definite refusal wrote
	// nothing, so those are spared the round trip. Only the undo of a
	// quorum is announced: a minority freed nobody.
	d.undo(r, id, res, v.got >= d.quorum)
	if v.got+len(v.taken) < d.quorum {
		return driver.Grant{}, locker.Unavailable(fmt.Errorf("redlock: %d of %d masters answered, %d needed: %w",
			v.got+len(v.taken), len(d.masters), d.quorum, errors.Join(v.errs...)))
	}
	return driver.Grant{Retry: d.retryIn(r.Key, &v, time.Since(start))}, nil
}

// votes sorts the masters' replies to an acquire round.
type votes struct {
	got, nre int             // masters where the hold is ours now; of them, re-entered
	taken    []int           // masters held by another owner
	holders  map[int64]int   // their hold's attempt id -> masters
	pttls    []time.Duration // their records' remaining TTLs
	errs     []error         // masters that did not answer
	reFence  uint64          // largest recorded fence among re-entered masters
	newFence uint64          // fence for a fresh hold: largest counter among grants
	counted  []uint64        // what each fresh grant counted to
}

// sortReplies sorts the replies of an acquire round, and notes the
// largest fence counter they show.
func (d *redlock) sortReplies(res []result[[]int64]) votes {
	v := votes{holders: map[int64]int{}}
	for i, r := range res {
		if r.err != nil || len(r.v) < 3 {
			v.errs = append(v.errs, &redsync.RedisError{Node: i, Err: cmp.Or(r.err, errors.New("short reply"))})
			continue
		}
		d.see(uint64(r.v[len(r.v)-1]))
		switch r.v[0] {
		case refused:
			v.taken = append(v.taken, i)
			v.holders[r.v[2]]++
			v.pttls = append(v.pttls, time.Duration(r.v[1])*time.Millisecond)
		case reentered:
			v.got++
			v.nre++
			v.reFence = max(v.reFence, uint64(r.v[1]))
			v.newFence = max(v.newFence, uint64(r.v[2])+1)
		case granted:
			v.got++
			v.counted = append(v.counted, uint64(r.v[1]))
			v.newFence = max(v.newFence, uint64(r.v[1]))
		}
	}
	return v
}

// fence settles the fence of a hold granted by a quorum, claiming it on
// the masters through claim where needed; an error if it could not be
// made durable.
func (d *redlock) fence(ctx context.Context, v *votes, reentrant bool, claim func(context.Context, uint64) []result[[]int64]) (uint64, error) {
	atFence := 0 // fresh grants whose counter reached the fence
	for _, c := range v.counted {
		if c == v.newFence {
			atFence++
		}
	}
	switch {
	case v.nre >= d.quorum:
		// Re-entry: our hold stands on a quorum. Masters that granted
		// afresh record the hold's fence (best effort; keep-alive too).
		if v.nre < v.got {
			claim(ctx, v.reFence)
		}
		return v.reFence, nil
	case v.nre == 0 && len(v.errs) == 0 && (atFence == len(v.counted) || atFence >= d.quorum && !reentrant):
		// A quorum of grants counted to the fence: it is already at or
		// below the counter of a quorum. Every master answered, so no
		// record holds a higher one. Records that counted lower learn the
		// fence in the background (a random owner's claim can never touch
		// a later hold), and a re-entry or Status reads the largest, which
		// a quorum already has.
		if atFence < len(v.counted) {
			d.bg.Go(func() { claim(context.Background(), v.newFence) })
		}
		return v.newFence, nil
	default:
		// Make the fence durable: raise the counters to it and count the
		// masters where our record still stands.
		t := count(claim(ctx, v.newFence))
		v.errs = append(v.errs, t.errs...)
		return v.newFence, d.outcome(t, t.n[1])
	}
}

// retryIn is how long a refused attempt's waiter may wait without a
// notification: until enough of the holders' records have expired for a
// quorum to be free.
func (d *redlock) retryIn(key string, v *votes, took time.Duration) time.Duration {
	var retry time.Duration // a split vote, or time ran out: try again at once
	if need := d.quorum - v.got; need > 0 && need <= len(v.pttls) {
		slices.Sort(v.pttls)
		retry = max(v.pttls[need-1], 0)
	}
	most := 0
	for a, n := range v.holders {
		most = max(most, n)
		if d.news.announced(key, strconv.FormatInt(a, 10)) {
			// Its release was heard from some masters and is still on its
			// way to these; their copies of it will be dropped as heard.
			retry = 0
		}
	}
	if most+len(v.errs) < d.quorum {
		// A split vote: contenders, us among them, each got a minority
		// and took it back. Nobody will announce a release, so retry
		// after a random pause that lets one of them go first.
		retry = time.Duration(rand.Int64N(int64(2*took) + 1))
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

// undo drops the failed attempt's hold wherever it may have landed: on
// every master that granted, re-entered or did not answer. It runs without
// the caller's ctx (a cancelled Lock must still leave nothing behind), and
// masters that do not answer are tried again in the background: the hold
// is named by the attempt id, so a second drop is harmless and never takes
// a newer hold.
func (d *redlock) undo(r *driver.Request, id string, res []result[[]int64], announce bool) {
	channel := ""
	if announce {
		channel = d.channel(r.Key)
	}
	d.release(context.Background(), r.TTL, func(i int) bool { return res[i].err != nil || res[i].v[0] != refused },
		[]string{d.lockKey(r.Key)}, r.Owner, channel, id)
}
