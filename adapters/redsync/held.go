package redsync

import (
	"context"
	"slices"
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
// the fence where a master lacks it: valid TTL − drift from the call's start.
func (h *held) Refresh(ctx context.Context) (time.Duration, error) {
	if err := h.d.outcome(h.claim(ctx, h.fence), 1); err != nil {
		return 0, err
	}
	return h.ttl - h.d.drift(h.ttl), nil
}

// claim runs claimScript for this hold with the given fence.
func (h *held) claim(ctx context.Context, fence uint64) []result[[]int64] {
	return h.d.round(ctx, h.ttl, nil, claimScript, []string{h.d.lockKey(h.key), h.d.counterKey()},
		h.owner, h.ttl.Milliseconds(), fence, h.id)
}

// Release drops this hold on every master, announcing the last hold's.
func (h *held) Release(ctx context.Context) error {
	return h.d.outcome(h.release(ctx, nil, true), 1, 2)
}

// release drops the hold id on the masters that on picks (nil: all),
// publishing the key's release if announce. Masters that did not answer
// are tried again in the background, up to 3 times spaced by the node
// timeout, lest a slow one keep the record (and its waiters) until it
// expires: dropping a hold by its id twice changes nothing.
func (h *held) release(ctx context.Context, on []bool, announce bool) []result[[]int64] {
	d, channel := h.d, ""
	if announce {
		channel = d.channel(h.key)
	}
	round := func(ctx context.Context, on []bool) []result[[]int64] {
		return d.round(ctx, h.ttl, on, releaseScript, []string{d.lockKey(h.key)}, h.owner, channel, h.id)
	}
	res := round(ctx, on)
	if failed := failedMasters(res); failed != nil {
		d.bg.Go(func() {
			every, tries := backoff.Policy{Min: d.nodeTimeout(h.ttl), Max: d.nodeTimeout(h.ttl)}, 0
			time.Sleep(every.Min) // the round that failed has just ended
			backoff.Retry(context.Background(), every, func(ctx context.Context) bool {
				failed, tries = failedMasters(round(ctx, failed)), tries+1
				return failed == nil || tries == 3
			})
		})
	}
	return res
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
