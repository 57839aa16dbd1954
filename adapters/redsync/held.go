package redsync

import (
	"context"
	"time"

	"github.com/locker-go/locker/internal/backoff"
)

// held is the driver.Hold of one hold on a quorum of masters.
type held struct {
	d          *redlock
	key, owner string
	id         string // the hold's own id in the records: its attempt's
	fence      uint64
	ttl        time.Duration
}

// Refresh extends our records on a quorum (redsync's Extend), re-recording
// the fence where a master lacks it. The lease is valid for TTL − drift
// from the call's start: each master extended a record that was still ours.
func (h *held) Refresh(ctx context.Context) (time.Duration, error) {
	d := h.d
	t := count(d.round(ctx, h.ttl, claimScript, []string{d.lockKey(h.key), d.counterKey()},
		h.owner, h.ttl.Milliseconds(), h.fence, h.id))
	if err := d.outcome(t, t.n[1]); err != nil {
		return 0, err
	}
	return h.ttl - d.drift(h.ttl), nil
}

// Release drops this hold on every master; the last hold's release
// publishes on the key's channel from the script, waking the waiters.
func (h *held) Release(ctx context.Context) error {
	d := h.d
	t := count(d.release(ctx, h.ttl, nil, []string{d.lockKey(h.key)}, h.owner, d.channel(h.key), h.id))
	return d.outcome(t, t.n[1]+t.n[2])
}

// release runs releaseScript (ARGV owner, channel, hold id) on the masters
// that which picks (nil: all). Masters that did not answer are tried again
// in the background, so that a slow one does not keep a record (and its
// waiters) until it expires: a slow reply usually means the script ran,
// and dropping a hold by its id twice, or after a newer hold of the same
// owner came, changes nothing.
func (d *redlock) release(ctx context.Context, ttl time.Duration, which func(int) bool, keys []string, args ...any) []result[[]int64] {
	res := d.roundOn(ctx, ttl, which, releaseScript, keys, args...)
	if failed := failedMasters(res); len(failed) > 0 {
		d.bg.Go(func() { d.retry(ttl, failed, keys, args...) })
	}
	return res
}

// failedMasters lists the masters whose reply is missing.
func failedMasters(res []result[[]int64]) map[int]bool {
	failed := map[int]bool{}
	for i, r := range res {
		if r.err != nil {
			failed[i] = true
		}
	}
	return failed
}

// retry releases again on the failed masters, up to 3 times, spaced by
// the node timeout; a master down for longer lets the record expire.
func (d *redlock) retry(ttl time.Duration, failed map[int]bool, keys []string, args ...any) {
	ctx, tries := context.Background(), 0
	every := backoff.Policy{Min: d.nodeTimeout(ttl), Max: d.nodeTimeout(ttl)}
	if !backoff.Sleep(ctx, every.Min) { // the round that failed has just ended
		return
	}
	backoff.Retry(ctx, every, func(ctx context.Context) bool {
		todo := failed // read by this round's stragglers too: never written
		failed = failedMasters(d.roundOn(ctx, ttl, func(i int) bool { return todo[i] }, releaseScript, keys, args...))
		tries++
		return len(failed) == 0 || tries == 3
	})
}
