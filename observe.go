package locker

import (
	"context"
	"errors"
	"time"

	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/backoff"
)

// Leader is the leader of an election as an observer sees it: the name,
// the leader's label (WithLabel), its term (the lease's Fence) and when
// the observer learned of it.
type Leader struct {
	Name, Label string
	Fence       uint64
	Since       time.Time
}

// How often an observer reads the leader again without a signal: with no
// driver.Watcher, and, with one, in case a signal was lost on the way (a
// pub/sub message during a reconnect).
const (
	observePoll   = 500 * time.Millisecond
	observeSafety = 10 * time.Second
)

// Observe sends the current leader of the election name at once (a zero
// Leader when there is none), then each change, in order of terms, until
// ctx ends; then the channel closes. It needs no campaign of its own. The
// changes are heard by the backend's notification where the driver is a
// driver.Watcher, and at the leader's expiry (a leader whose process died
// without resigning); elsewhere the leader is read every 500 ms. A leader
// that came and went between two reads is not reported. l must be an
// Admin (every adapter's Locker is, and wrappers that pass Admin on):
// over another Locker the channel closes at once. A backend that cannot
// be reached is read again, with backoff, until ctx ends.
func Observe(ctx context.Context, l Locker, name string) <-chan Leader {
	ch := make(chan Leader)
	a, ok := l.(Admin)
	if !ok || checkElection(name, Options{election: true}) != nil || ValidateKey(name) != nil {
		close(ch)
		return ch
	}
	ob := &observer{name: name, admin: a}
	if p := portableOf(l); p != nil {
		ob.watcher, _ = p.d.(driver.Watcher)
		ob.space, ob.node = p.node(name, Options{election: true})
	}
	go ob.run(ctx, ch)
	return ch
}

// portableOf finds the portable Locker under l's wrappers (those with an
// Unwrap method, as otellocker's), or nil.
func portableOf(l Locker) *portable {
	for {
		switch v := l.(type) {
		case *portable:
			return v
		case *adminLocker:
			return v.portable
		case interface{ Unwrap() Locker }:
			l = v.Unwrap()
		default:
			return nil
		}
	}
}

// observer follows one election for Observe.
type observer struct {
	name    string
	admin   Admin
	watcher driver.Watcher // nil: read on a timer
	space   driver.Space
	node    string
	changed <-chan struct{}
	stop    func()
}

func (ob *observer) run(ctx context.Context, ch chan<- Leader) {
	defer close(ch)
	defer func() {
		if ob.stop != nil {
			ob.stop()
		}
	}()
	var last Leader
	for sent := false; ; {
		ob.watch(ctx)
		var cur Leader
		var next time.Duration
		if !backoff.Retry(ctx, observeRetry, func(ctx context.Context) bool {
			var err error
			cur, next, err = ob.look(ctx)
			return err == nil
		}) {
			return
		}
		if !sent || cur.Fence != last.Fence {
			select {
			case ch <- cur:
			case <-ctx.Done():
				return
			}
			last, sent = cur, true
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-ob.changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// observeRetry spaces the reads of a backend that cannot be reached.
var observeRetry = backoff.Policy{Min: 50 * time.Millisecond, Max: 5 * time.Second, Jitter: true}

// watch starts the driver's signals if there are none yet; a failure
// leaves them to the next turn (look's timer goes on meanwhile).
func (ob *observer) watch(ctx context.Context) {
	if ob.watcher == nil || ob.changed != nil {
		return
	}
	switch c, stop, err := ob.watcher.Watch(ctx, ob.space, ob.node); {
	case err == nil:
		ob.changed, ob.stop = c, stop
	case errors.Is(err, driver.ErrSkip):
		ob.watcher = nil // declined for good: read on the timer
	}
}

// look reads the leader, and says when to read again without a signal: at
// the leader's expiry (it may have died), and at the latest after
// observeSafety (observePoll without signals).
func (ob *observer) look(ctx context.Context) (Leader, time.Duration, error) {
	next := observeSafety
	if ob.changed == nil {
		next = observePoll
	}
	info, err := ob.admin.Status(ctx, ob.name, inElection)
	if errors.Is(err, ErrNotHeld) {
		return Leader{}, next, nil
	}
	if err != nil {
		return Leader{}, 0, err
	}
	if !info.Expires.IsZero() {
		next = min(next, max(time.Until(info.Expires), 0)+time.Millisecond)
	}
	return Leader{Name: ob.name, Label: info.Label, Fence: info.Fence, Since: time.Now()}, next, nil
}
