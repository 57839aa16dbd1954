package redsync

import (
	"context"
	"errors"
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

// round runs a script whose reply is a list of integers on every master,
// for a call with the given TTL.
func (d *redlock) round(ctx context.Context, ttl time.Duration, s *goredis.Script, keys []string, args ...any) []result[[]int64] {
	return d.roundOn(ctx, ttl, nil, s, keys, args...)
}

// roundOn is round on the masters that which picks (nil: all); the others
// reply nil.
func (d *redlock) roundOn(ctx context.Context, ttl time.Duration, which func(int) bool, s *goredis.Script, keys []string, args ...any) []result[[]int64] {
	return each(ctx, d, d.nodeTimeout(ttl), func(ctx context.Context, i int, c goredis.UniversalClient) ([]int64, error) {
		if which != nil && !which(i) {
			return nil, nil
		}
		v, err := s.Run(ctx, c, keys, args...).Int64Slice()
		if err == nil && len(v) == 0 {
			err = errors.New("empty script reply")
		}
		return v, err
	})
}

// tally sorts the replies of a round: how many masters replied with each
// first value, and the node errors of the others.
type tally struct {
	n    map[int64]int
	errs []error
}

func count(res []result[[]int64]) tally {
	t := tally{n: map[int64]int{}}
	for i, r := range res {
		if r.err != nil {
			t.errs = append(t.errs, &redsync.RedisError{Node: i, Err: r.err})
			continue
		}
		t.n[r.v[0]]++
	}
	return t
}

// outcome turns a round on records we must own into nil (a quorum of
// them answered ok), ErrNotHeld (too many are not ours for a quorum), or
// ErrUnavailable wrapping the node errors.
func (d *redlock) outcome(t tally, ok int) error {
	notOurs := len(d.masters) - ok - len(t.errs)
	switch {
	case ok >= d.quorum:
		return nil
	case notOurs > len(d.masters)-d.quorum:
		return locker.ErrNotHeld
	default:
		return locker.Unavailable(errors.Join(t.errs...))
	}
}
