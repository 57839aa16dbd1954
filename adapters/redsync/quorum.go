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
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type reply struct {
		i int
		r result[T]
	}
	ch := make(chan reply, len(d.masters))
	for i, m := range d.masters {
		go func() {
			v, err := fn(ctx, i, m.client)
			ch <- reply{i, result[T]{v, err}}
		}()
	}
	res := make([]result[T], len(d.masters))
	for i := range res {
		res[i].err = errNoAnswer
	}
	for range d.masters {
		select {
		case r := <-ch:
			res[r.i] = r.r
		case <-ctx.Done():
			return res
		}
	}
	return res
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
	return each(ctx, d, d.nodeTimeout(ttl), func(ctx context.Context, i int, c goredis.UniversalClient) ([]int64, error) {
		if on != nil && !on[i] {
			return nil, nil
		}
		v, err := s.Run(ctx, c, keys, args...).Int64Slice()
		if err == nil && len(v) == 0 {
			err = errors.New("empty script reply")
		}
		return v, err
	})
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
