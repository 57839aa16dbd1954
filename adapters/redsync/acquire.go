package redsync

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/go-redsync/redsync/v4"
	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/lease"
	"github.com/locker-go/locker/internal/wait"
)

// Outcomes of acquireScript on one master.
const (
	refused   = 0
	reentered = 1
	granted   = 2
)

// attempt is one Redlock round (two when the fence must be made durable).
// When another owner holds key it returns ErrLocked and how long until
// enough of its records expire for a quorum to be free.
// A waiter (waited) announces its take to the others.
func (l *Locker) attempt(ctx context.Context, key string, o locker.Options, waited bool) (locker.Lease, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, wait.CtxErr(ctx, key, err)
	}
	id := strconv.FormatInt(rand.Int64N(1<<53-1)+1, 10) // exact as a Lua number
	reentrant := "0"
	if o.StableOwner {
		reentrant = "1"
	}
	keys := []string{l.lockKey(key), l.counterKey()}
	start := time.Now()
	res := l.round(ctx, acquireScript, keys, o.Owner, o.TTL.Milliseconds(), id, reentrant, l.counted.Load()+1)
	for _, r := range res {
		if r.err == nil && len(r.v) >= 3 {
			l.see(uint64(r.v[len(r.v)-1]))
		}
	}

	var (
		got, nre int               // masters where the hold is ours now; of them, re-entered
		taken    []int             // masters held by another owner
		holders  = map[int64]int{} // their hold's attempt id -> masters
		pttls    []time.Duration
		errs     []error
		reFence  uint64   // largest recorded fence among re-entered masters
		newFence uint64   // fence for a fresh hold: largest counter among grants
		counted  []uint64 // what each fresh grant counted to
	)
	for i, r := range res {
		if r.err != nil || len(r.v) < 3 {
			errs = append(errs, &redsync.RedisError{Node: i, Err: orErr(r.err, errors.New("short reply"))})
			continue
		}
		switch r.v[0] {
		case refused:
			taken = append(taken, i)
			holders[r.v[2]]++
			pttls = append(pttls, time.Duration(r.v[1])*time.Millisecond)
		case reentered:
			got++
			nre++
			reFence = max(reFence, uint64(r.v[1]))
			newFence = max(newFence, uint64(r.v[2])+1)
		case granted:
			got++
			counted = append(counted, uint64(r.v[1]))
			newFence = max(newFence, uint64(r.v[1]))
		}
	}
	atFence := 0 // fresh grants whose counter reached the fence
	for _, c := range counted {
		if c == newFence {
			atFence++
		}
	}

	fence, holdErr := reFence, error(nil)
	if got >= l.quorum {
		switch {
		case nre >= l.quorum:
			// Re-entry: our hold stands on a quorum. Masters that granted
			// afresh record the hold's fence (best effort; keep-alive too).
			if nre < got {
				l.round(ctx, claimScript, keys, o.Owner, o.TTL.Milliseconds(), fence, id)
			}
		case nre == 0 && len(errs) == 0 && (atFence == len(counted) || atFence >= l.quorum && !o.StableOwner):
			// A quorum of grants counted to the fence: it is already at or
			// below the counter of a quorum. Every master answered, so no
			// record holds a higher one. Records that counted lower learn
			// the fence in the background (a random owner's claim can
			// never touch a later hold), and a re-entry or Status reads
			// the largest, which a quorum already has.
			fence = newFence
			if atFence < len(counted) {
				l.bg.Go(func() { l.round(context.Background(), claimScript, keys, o.Owner, o.TTL.Milliseconds(), fence, id) })
			}
		default:
			// Make the fence durable: raise the counters to it and count
			// the masters where our record still stands.
			fence = newFence
			t := count(l.round(ctx, claimScript, keys, o.Owner, o.TTL.Milliseconds(), fence, id))
			holdErr = l.outcome(t, t.n[1])
			errs = append(errs, t.errs...)
		}
		validity := o.TTL - l.drift(o.TTL)
		if holdErr == nil && time.Since(start) < validity {
			ops := &held{l: l, key: key, owner: o.Owner, id: id, fence: fence, ttl: o.TTL}
			ls, err := lease.New(l.set, lease.Config{
				Key: key, Owner: o.Owner, Fence: fence, TTL: o.TTL, KeepAlive: o.KeepAlive,
				Start: start, Validity: validity, Ops: ops,
			})
			if err != nil {
				return nil, 0, err
			}
			if waited {
				l.announceTake(key, id, o.TTL, fence)
			}
			return ls, 0, nil
		}
	}

	// Failed: take the attempt back on every master that granted or did
	// not answer (its grant may have landed). A definite refusal wrote
	// nothing, so those are spared the round trip. Only the undo of a
	// quorum is announced: a minority freed nobody.
	l.undo(key, o.Owner, id, res, got >= l.quorum)
	if got+len(taken) < l.quorum {
		err := locker.Unavailable(fmt.Errorf("redlock: %d of %d masters answered, %d needed: %w",
			got+len(taken), len(l.masters), l.quorum, errors.Join(errs...)))
		return nil, 0, wait.CtxErr(ctx, key, err)
	}
	retry := l.fallback(got, pttls)
	most := 0
	for a, n := range holders {
		most = max(most, n)
		if l.news.announced(key, strconv.FormatInt(a, 10)) {
			// Its release was heard from some masters and is still on its
			// way to these; their copies of it will be dropped as heard.
			retry = 0
		}
	}
	if most+len(errs) < l.quorum {
		// A split vote: contenders, us among them, each got a minority
		// and took it back. Nobody will announce a release, so retry
		// after a random pause that lets one of them go first.
		retry = time.Duration(rand.Int64N(int64(2*time.Since(start)) + 1))
	}
	return nil, retry, fmt.Errorf("%w: %q: %w", locker.ErrLocked, key, &redsync.ErrTaken{Nodes: taken})
}

// see raises the largest counter value this Locker has seen.
func (l *Locker) see(c uint64) {
	for {
		old := l.counted.Load()
		if c <= old || l.counted.CompareAndSwap(old, c) {
			return
		}
	}
}

// fallback is how long a waiter may sleep without a notification: until
// enough of the holders' records have expired for a quorum to be free.
func (l *Locker) fallback(got int, pttls []time.Duration) time.Duration {
	need := l.quorum - got // expirations still needed
	if need <= 0 || need > len(pttls) {
		return 0 // a split vote, or time ran out: try again at once
	}
	slices.Sort(pttls)
	if d := pttls[need-1]; d > 0 {
		return d
	}
	return 0
}

// undo drops the failed attempt's hold wherever it may have landed: on
// every master that granted, re-entered or did not answer. It runs without
// the caller's ctx (a cancelled Lock must still leave nothing behind), and
// masters that do not answer are tried again in the background: the hold
// is named by the attempt id, so a second drop is harmless and never takes
// a newer hold.
func (l *Locker) undo(key, owner, id string, res []result[[]int64], announce bool) {
	keys := []string{l.lockKey(key)}
	channel := ""
	if announce {
		channel = l.channel(key)
	}
	done := each(context.Background(), l, l.cfg.nodeTimeout, func(ctx context.Context, i int, c goredis.UniversalClient) ([]int64, error) {
		if res[i].err == nil && res[i].v[0] == refused {
			return nil, nil
		}
		return releaseScript.Run(ctx, c, keys, owner, channel, id).Int64Slice()
	})
	if failed := failedMasters(done); len(failed) > 0 {
		l.bg.Go(func() { l.retry(failed, releaseScript, keys, owner, channel, id) })
	}
}

// orErr is err, or alt when err is nil.
func orErr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}
