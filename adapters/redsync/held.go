package redsync

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// held is the lease.Ops of one hold on a quorum of masters.
type held struct {
	l          *Locker
	key, owner string
	id         string // the hold's own id in the records: its attempt's
	fence      uint64
	ttl        time.Duration
}

// Refresh extends our records on a quorum (redsync's Extend), re-recording
// the fence where a master lacks it. The lease is valid for TTL − drift
// from the call's start: each master extended a record that was still ours.
func (h *held) Refresh(ctx context.Context) (time.Duration, error) {
	l := h.l
	t := count(l.round(ctx, claimScript, []string{l.lockKey(h.key), l.counterKey()},
		h.owner, h.ttl.Milliseconds(), h.fence, h.id))
	if err := l.outcome(t, t.n[1]); err != nil {
		return 0, err
	}
	return h.ttl - l.drift(h.ttl), nil
}

// Release drops this hold on every master; the last hold's release
// publishes on the key's channel from the script, waking the waiters.
// Masters that did not answer are tried again in the background, so that
// a slow one does not keep a record (and its waiters) until it expires:
// a slow reply usually means the script ran, and dropping a hold by its id
// twice, or after a newer hold of the same owner came, changes nothing.
func (h *held) Release(ctx context.Context) error {
	l := h.l
	keys, args := []string{l.lockKey(h.key)}, []any{h.owner, l.channel(h.key), h.id}
	res := l.round(ctx, releaseScript, keys, args...)
	if failed := failedMasters(res); len(failed) > 0 {
		l.bg.Go(func() { l.retry(failed, releaseScript, keys, args...) })
	}
	t := count(res)
	return l.outcome(t, t.n[1]+t.n[2])
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

// retry runs an owner-checked script again on the failed masters, a few
// times, spaced by the node timeout; a master down for longer lets the
// record expire.
func (l *Locker) retry(failed map[int]bool, s *goredis.Script, keys []string, args ...any) {
	for range 3 {
		time.Sleep(l.cfg.nodeTimeout) // a background pause, not a wait for state
		todo := failed                // read by this round's stragglers too: never written
		res := each(context.Background(), l, l.cfg.nodeTimeout, func(ctx context.Context, i int, c goredis.UniversalClient) ([]int64, error) {
			if !todo[i] {
				return nil, nil
			}
			return s.Run(ctx, c, keys, args...).Int64Slice()
		})
		failed = map[int]bool{}
		for i, r := range res {
			if todo[i] && r.err != nil {
				failed[i] = true
			}
		}
		if len(failed) == 0 {
			return
		}
	}
}
