package redsync

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

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

// Acquire makes one Redlock attempt. Request.State is how long the call's
// last attempt took (none before the first).
func (d *redlock) Acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	if r.TTL <= d.drift(r.TTL)+d.nodeTimeout(r.TTL) {
		return driver.Grant{}, fmt.Errorf("%w: %v leaves no validity after the drift allowance and a node timeout", locker.ErrInvalidTTL, r.TTL)
	}
	last, _ := r.State.(time.Duration)
	if last > 0 {
		// A woken crowd would split the masters: see the package doc.
		woke := time.Now()
		if !backoff.Sleep(ctx, rand.N(last)) {
			return driver.Grant{}, ctx.Err()
		}
		if ttl, ok := d.news.takenSince(r.Key, woke); ok {
			return driver.Grant{Retry: ttl}, nil
		}
	}
	start := time.Now()
	g, err := d.attempt(ctx, r, last > 0)
	r.State = time.Since(start)
	return g, err
}

// attempt is one Redlock round (two when the fence must be made durable).
// A waiter (waited) announces its take to the others.
func (d *redlock) attempt(ctx context.Context, r *driver.Request, waited bool) (driver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	id := strconv.FormatInt(rand.Int64N(1<<53-1)+1, 10) // exact as a Lua number
	h := &held{d: d, key: r.Key, owner: r.Owner, id: id, ttl: r.TTL}
	start := time.Now()
	res := d.round(ctx, r.TTL, nil, acquireScript, []string{d.lockKey(r.Key), d.counterKey()},
		r.Owner, r.TTL.Milliseconds(), id, r.Reentrant, d.counted.Load()+1)
	v := d.sortReplies(res)
	if v.got >= d.quorum {
		var err error
		h.fence, err = d.fence(ctx, &v, r.Reentrant, h)
		if validity := r.TTL - d.drift(r.TTL); err == nil && time.Since(start) < validity {
			if waited {
				d.announceTake(r.Key, id, r.TTL, h.fence)
			}
			// Valid TTL − drift from the round's start: TTL − elapsed − drift from now.
			return driver.Grant{Hold: h, Fence: h.fence, Start: start, Validity: validity}, nil
		}
	}
	// Failed: take the attempt back, even if ctx ended, wherever it may
	// have landed (not on a refusal). Only the undo of a quorum is
	// announced: a minority freed nobody.
	undo := make([]bool, len(res))
	for i, r := range res {
		undo[i] = r.err != nil || r.v[0] != refused
	}
	h.release(context.Background(), undo, v.got >= d.quorum)
	if v.got+len(v.pttls) < d.quorum {
		return driver.Grant{}, locker.Unavailable(fmt.Errorf("redlock: %d of %d masters answered, %d needed: %w",
			v.got+len(v.pttls), len(d.masters), d.quorum, errors.Join(v.errs...)))
	}
	return driver.Grant{Retry: d.retryIn(r.Key, &v, time.Since(start))}, nil
}

// votes sorts the masters' replies to an acquire round.
type votes struct {
	got, nre int             // masters where the hold is ours now; of them, re-entered
	holders  map[int64]int   // attempt id of another owner's hold -> masters
	pttls    []time.Duration // those records' remaining TTLs, one per master
	errs     []error         // masters that did not answer
	reFence  uint64          // largest recorded fence among re-entered masters
	newFence uint64          // fence for a fresh hold: largest counter among grants
	counted  []uint64        // what each fresh grant counted to
}

// sortReplies sorts the replies of an acquire round, noting the largest
// counter they show.
func (d *redlock) sortReplies(res []result[[]int64]) votes {
	v := votes{holders: map[int64]int{}, errs: nodeErrs(res)}
	for _, r := range res {
		if r.err != nil {
			continue
		}
		d.see(uint64(r.v[len(r.v)-1]))
		switch r.v[0] {
		case refused:
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

// fence settles the fence of h, granted by a quorum, claiming it on the
// masters where needed; an error if it could not be made durable.
func (d *redlock) fence(ctx context.Context, v *votes, reentrant bool, h *held) (uint64, error) {
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
			h.claim(ctx, v.reFence)
		}
		return v.reFence, nil
	case v.nre == 0 && len(v.errs) == 0 && (atFence == len(v.counted) || atFence >= d.quorum && !reentrant):
		// A quorum of grants counted to the fence and every master
		// answered (none holds a higher one): it is durable. Records that
		// counted lower learn it in the background.
		if atFence < len(v.counted) {
			d.bg.Go(func() { h.claim(context.Background(), v.newFence) })
		}
		return v.newFence, nil
	default:
		// Raise the counters to the fence; our record must still stand.
		res := h.claim(ctx, v.newFence)
		v.errs = append(v.errs, nodeErrs(res)...)
		return v.newFence, d.outcome(res, 1)
	}
}

// retryIn is how long a refused waiter may wait without a notification:
// until enough of the holders' records expire for a quorum to be free.
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
			// Its release is on its way here (copies count once).
			retry = 0
		}
	}
	if most+len(v.errs) < d.quorum {
		// A split vote, taken back by all: nobody will announce a
		// release, so a random pause lets one contender go first.
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
