package redsync

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/go-redsync/redsync/v4"
	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
)

// reply is master i's reply to a round.
type reply[T any] struct {
	i int
	r result[T]
}

// errNoAnswer marks a master that did not answer within the node timeout.
var errNoAnswer = errors.New("no answer within the node timeout")

// result is one master's reply to one round.
type result[T any] struct {
	v   T
	err error
}

// each runs fn on every master of d in parallel and returns once all
// answered or timeout passed; a master that did not answer in time gets
// errNoAnswer. Stragglers finish in the background, their replies dropped.
func each[T any](ctx context.Context, d *redlock, timeout time.Duration, fn func(ctx context.Context, i int, c goredis.UniversalClient) (T, error)) []result[T] {
	res, _ := eachUntil(ctx, d, timeout, fn, nil)
	return res
}

// eachUntil is each that returns as soon as decided (if not nil) says
// the replies so far settle the round, with late, which waits for the
// others (as each would have) and returns every master's reply: a round
// a quorum decided does not wait for a stalled master. The calls still
// out run on to the timeout at most, whatever becomes of the caller's
// ctx after the return, since their replies are wanted (a late grant is
// given the fence or its mark removed, a release is tried again). late
// is nil if the round did not end early.
func eachUntil[T any](ctx context.Context, d *redlock, timeout time.Duration, fn func(ctx context.Context, i int, c goredis.UniversalClient) (T, error),
	decided func([]result[T]) bool) (res []result[T], late func() []result[T]) {
	calls, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	ch := make(chan reply[T], len(d.masters))
	for i, m := range d.masters {
		go func() {
			v, err := fn(calls, i, m.client)
			ch <- reply[T]{i, result[T]{v, err}}
		}()
	}
	res = make([]result[T], len(d.masters))
	for i := range res {
		res[i].err = errNoAnswer
	}
	for left := len(d.masters); left > 0; {
		select {
		case r := <-ch:
			res[r.i], left = r.r, left-1
			if left > 0 && decided != nil && decided(res) {
				return slices.Clone(res), rest(calls, cancel, ch, res, left)
			}
		case <-calls.Done():
			cancel()
			return res, nil
		case <-ctx.Done(): // the caller's: its calls end too, as they always did
			cancel()
			return res, nil
		}
	}
	cancel()
	return res, nil
}

// rest collects into res, in the background, the left replies still to
// come on ch (until calls ends), then ends calls; the function it returns
// waits for that and returns res.
func rest[T any](calls context.Context, cancel context.CancelFunc, ch <-chan reply[T], res []result[T], left int) func() []result[T] {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		for ; left > 0; left-- {
			select {
			case r := <-ch:
				res[r.i] = r.r
			case <-calls.Done():
				return
			}
		}
	}()
	return func() []result[T] {
		<-done
		return res
	}
}

// nodeErrs returns the failed masters' errors, as redsync reports them.
func nodeErrs[T any](res []result[T]) []error {
	var errs []error
	for i, r := range res {
		if r.err != nil {
			errs = append(errs, &redsync.RedisError{Node: i, Err: r.err})
		}
	}
	return errs
}

// round runs a script replying integers on the masters that on picks
// (nil: all; the others reply nil), for a call with the given TTL.
func (d *redlock) round(ctx context.Context, ttl time.Duration, on []bool, s *goredis.Script, keys []string, args ...any) []result[[]int64] {
	res, _ := d.roundUntil(ctx, ttl, on, nil, s, keys, args...)
	return res
}

// roundUntil is round, ending as soon as decided says (see eachUntil).
func (d *redlock) roundUntil(ctx context.Context, ttl time.Duration, on []bool, decided func([]result[[]int64]) bool,
	s *goredis.Script, keys []string, args ...any) ([]result[[]int64], func() []result[[]int64]) {
	return eachUntil(ctx, d, d.nodeTimeout(ttl), func(ctx context.Context, i int, c goredis.UniversalClient) ([]int64, error) {
		if on != nil && !on[i] {
			return nil, nil
		}
		v, err := s.Run(ctx, c, keys, args...).Int64Slice()
		if err == nil && len(v) == 0 {
			err = errors.New("empty script reply")
		}
		return v, err
	}, decided)
}

// outcome is nil if a quorum replied one of ours (the replies that mean
// the record is ours), ErrNotHeld if too many records are not ours for a
// quorum, else ErrUnavailable.
func (d *redlock) outcome(res []result[[]int64], ours ...int64) error {
	errs, ok := nodeErrs(res), 0
	for _, r := range res {
		if r.err == nil && slices.Contains(ours, r.v[0]) {
			ok++
		}
	}
	switch {
	case ok >= d.quorum:
		return nil
	case len(d.masters)-ok-len(errs) > len(d.masters)-d.quorum:
		return locker.ErrNotHeld
	default:
		return locker.Unavailable(errors.Join(errs...))
	}
}
