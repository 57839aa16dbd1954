package redsync

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
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
	res, _ := eachUntil(ctx, d, timeout, fn, nil, false)
	return res
}

// eachUntil is each that returns as soon as decided (if not nil) says
// the replies so far settle the round, with the others' replies to come
// (late; nil if the round did not end early): a round a quorum decided
// does not wait for a stalled master. The calls still out run on to the
// timeout at most, whatever becomes of the caller's ctx after the
// return, since their replies are wanted (a late grant is given the
// fence, its mark removed, its release sent once it landed). With keep
// (an attempt's round, a release's), a round whose caller gives up
// returns so too, its calls running on: cut off, a script already sent
// may yet run on its master after an undo sent on another connection,
// and leave a hold or a mark nobody takes back until it lapses. Without
// keep, and for a caller that gave up before the round, the calls end
// with the caller's ctx (go-redis sends nothing for an ended one).
func eachUntil[T any](ctx context.Context, d *redlock, timeout time.Duration, fn func(ctx context.Context, i int, c goredis.UniversalClient) (T, error),
	decided func([]result[T]) bool, keep bool) (res []result[T], late *replies[T]) {
	runOn := keep && ctx.Err() == nil // the calls outlive a caller that gives up
	base := ctx
	if runOn || decided != nil && ctx.Err() == nil {
		base = context.WithoutCancel(ctx)
	}
	calls, cancel := context.WithTimeout(base, timeout)
	ch := make(chan reply[T], len(d.masters))
	for i, m := range d.masters {
		d.crew.run(func() {
			v, err := fn(calls, i, m.client)
			ch <- reply[T]{i, result[T]{v, err}}
		})
	}
	res = make([]result[T], len(d.masters))
	for i := range res {
		res[i].err = errNoAnswer
	}
	got := make([]bool, len(d.masters))
	for left := len(d.masters); left > 0; {
		select {
		case r := <-ch:
			res[r.i], got[r.i], left = r.r, true, left-1
			if left > 0 && decided != nil && decided(res) {
				late = newReplies(res, got)
				go late.collect(calls, cancel, ch, left)
				return res, late
			}
		case <-calls.Done():
			cancel()
			return res, nil
		case <-ctx.Done(): // the caller's
			if !runOn {
				cancel()
				return res, nil
			}
			late = newReplies(res, got)
			go late.collect(calls, cancel, ch, left)
			return res, late
		}
	}
	cancel()
	return res, nil
}

// replies are a round's replies still coming in after it ended early.
type replies[T any] struct {
	mu   sync.Mutex
	res  []result[T]     // errNoAnswer until a reply comes
	got  []bool          // a reply came
	in   []chan struct{} // closed as master i's reply comes, or none will
	done chan struct{}
}

// newReplies starts the replies of a round that ended early with res,
// got marking the masters that replied.
func newReplies[T any](res []result[T], got []bool) *replies[T] {
	l := &replies[T]{res: slices.Clone(res), got: slices.Clone(got), in: make([]chan struct{}, len(res)), done: make(chan struct{})}
	for i := range res {
		l.in[i] = make(chan struct{})
		if got[i] {
			close(l.in[i])
		}
	}
	return l
}

// collect takes the left replies still to come on ch, until calls ends,
// then ends calls.
func (l *replies[T]) collect(calls context.Context, cancel context.CancelFunc, ch <-chan reply[T], left int) {
	defer close(l.done)
	defer cancel()
	defer func() { // the replies that will not come
		l.mu.Lock()
		defer l.mu.Unlock()
		for i, got := range l.got {
			if !got {
				close(l.in[i])
			}
		}
	}()
	for ; left > 0; left-- {
		select {
		case r := <-ch:
			l.mu.Lock()
			l.res[r.i], l.got[r.i] = r.r, true
			close(l.in[r.i])
			l.mu.Unlock()
		case <-calls.Done():
			return
		}
	}
}

// all waits for every reply (or the timeout) and returns them: the
// caller's own copy.
func (l *replies[T]) all() []result[T] {
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.res)
}

// after is closed once master i's reply came, or will not.
func (l *replies[T]) after(i int) <-chan struct{} { return l.in[i] }

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
	res, _ := d.roundUntil(ctx, ttl, on, nil, false, s, keys, args...)
	return res
}

// roundUntil is round, ending as soon as decided says, or, with keep, the
// caller gives up (see eachUntil).
func (d *redlock) roundUntil(ctx context.Context, ttl time.Duration, on []bool, decided func([]result[[]int64]) bool, keep bool,
	s *goredis.Script, keys []string, args ...any) ([]result[[]int64], *replies[[]int64]) {
	return eachUntil(ctx, d, d.nodeTimeout(ttl), func(ctx context.Context, i int, c goredis.UniversalClient) ([]int64, error) {
		if on != nil && !on[i] {
			return nil, nil
		}
		return runScript(ctx, c, s, keys, args)
	}, decided, keep)
}

// runScript runs a script replying integers on one master.
func runScript(ctx context.Context, c goredis.UniversalClient, s *goredis.Script, keys []string, args []any) ([]int64, error) {
	v, err := s.Run(ctx, c, keys, args...).Int64Slice()
	if err == nil && len(v) == 0 {
		err = errors.New("empty script reply")
	}
	return v, err
}

// quorumOf is how many masters must grant or keep a hold of mode m under
// Limit n: a majority, and for a Limited hold of n > 1 more than n·N/(n+1)
// masters. Each master admits at most n Limited holders; n+1 holders on
// q masters each fill (n+1)·q records, which N masters of n each hold only
// if (n+1)·q <= n·N: on more, two of them meet on a full master, as two
// exclusive holders' majorities do. With 5 masters: 3 for n = 1, 4 for
// n = 2 or 3, all 5 from n = 4. (A majority alone let 4 hold a Limit(3)
// when their requests reached the masters in different orders.)
func (d *redlock) quorumOf(m driver.Mode, n int) int {
	if m != driver.Limited || n < 2 {
		return d.quorum
	}
	N := len(d.masters)
	return max(d.quorum, min(N, n*N/(n+1)+1))
}

// quorumFor is the quorum that grants all of rs: the largest of theirs
// (quorumOf), as a batch is granted whole or not at all.
func (d *redlock) quorumFor(rs []*driver.Request) int {
	q := d.quorum
	for _, r := range rs {
		q = max(q, d.quorumOf(r.Mode, r.Limit))
	}
	return q
}

// outcome is nil if a quorum replied one of ours (the replies that mean
// the record is ours), ErrNotHeld if too many records are not ours for a
// quorum, else ErrUnavailable.
func (d *redlock) outcome(res []result[[]int64], ours ...int64) error {
	return d.outcomeAt(d.quorum, res, ours...)
}

// outcomeAt is outcome for a quorum of q masters (quorumOf).
func (d *redlock) outcomeAt(q int, res []result[[]int64], ours ...int64) error {
	errs, ok := nodeErrs(res), 0
	for _, r := range res {
		if r.err == nil && len(r.v) > 0 && slices.Contains(ours, r.v[0]) { // none from a master not asked
			ok++
		}
	}
	switch {
	case ok >= q:
		return nil
	case len(d.masters)-ok-len(errs) > len(d.masters)-q:
		return locker.ErrNotHeld
	default:
		return locker.Unavailable(errors.Join(errs...))
	}
}
