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

// each runs fn on every master of l in parallel and returns once all
// answered or timeout passed; a master that did not answer in time gets
// errNoAnswer. Stragglers finish in the background, their replies dropped.
func each[T any](ctx context.Context, l *Locker, timeout time.Duration, fn func(ctx context.Context, i int, c goredis.UniversalClient) (T, error)) []result[T] {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type reply struct {
		i int
		r result[T]
	}
	ch := make(chan reply, len(l.masters))
	for i, m := range l.masters {
		go func() {
			v, err := fn(ctx, i, m.client)
			ch <- reply{i, result[T]{v, err}}
		}()
	}
	res := make([]result[T], len(l.masters))
	answered := make([]bool, len(l.masters))
	for range l.masters {
		select {
		case r := <-ch:
			res[r.i], answered[r.i] = r.r, true
		case <-ctx.Done():
			for i := range res {
				if !answered[i] {
					res[i].err = errNoAnswer
				}
			}
			return res
		}
	}
	return res
}

// round runs a script whose reply is a list of integers on every master.
func (l *Locker) round(ctx context.Context, s *goredis.Script, keys []string, args ...any) []result[[]int64] {
	return each(ctx, l, l.cfg.nodeTimeout, func(ctx context.Context, _ int, c goredis.UniversalClient) ([]int64, error) {
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
func (l *Locker) outcome(t tally, ok int) error {
	notOurs := len(l.masters) - ok - len(t.errs)
	switch {
	case ok >= l.quorum:
		return nil
	case notOurs > len(l.masters)-l.quorum:
		return locker.ErrNotHeld
	default:
		return locker.Unavailable(errors.Join(t.errs...))
	}
}
