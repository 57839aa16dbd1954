package redsync

import (
	"context"
	"errors"
	"fmt"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// Watches (locker.Observe) ride the masters' subscriptions to the keys'
// channels, which carry releases already: every message on a
// key's channel signals its watchers, and an election's grants and
// releases are announced there too (driver.Announcer), with a payload
// that waiters ignore. A release that hands the key to a waiter tells
// that waiter's Locker alone (handoff.go): watchers elsewhere hear of it
// by the announcements, as of any grant.

// announcement is Announce's payload: no release has it (theirs hold a
// space), nor an earlier version's take (takePrefix and an id).
const announcement = "o"

// watches are the Watch channels of a driver, by name.
type watches struct {
	mu  sync.Mutex
	set map[name]map[chan struct{}]struct{}
}

// Watch signals every message on key's channel from a quorum of masters'
// subscriptions on (two quorums share a master, so no announcement after
// it returns goes unheard), and every subscription made again after a
// reconnect (a message may have been lost meanwhile).
func (d *redlock) Watch(ctx context.Context, space driver.Space, key string) (<-chan struct{}, func(), error) {
	n, c := name{space, key}, make(chan struct{}, 1)
	stop := d.watches.add(n, c)
	if err := d.subscribed(ctx); err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}

// Announce publishes a change of key on its channel on every master; a
// quorum must take it.
func (d *redlock) Announce(ctx context.Context, space driver.Space, key string) error {
	channel := d.channel(name{space, key})
	res := each(ctx, d, d.nodeTimeout(locker.DefaultTTL), func(ctx context.Context, _ int, c goredis.UniversalClient) ([]int64, error) {
		return nil, c.Publish(ctx, channel, announcement).Err()
	})
	if errs := nodeErrs(res); len(d.masters)-len(errs) < d.quorum {
		return locker.Unavailable(fmt.Errorf("redlock: an announcement reached fewer than %d of %d masters: %w", d.quorum, len(d.masters), errors.Join(errs...)))
	}
	return nil
}

func (w *watches) add(n name, c chan struct{}) (stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.set == nil {
		w.set = map[name]map[chan struct{}]struct{}{}
	}
	if w.set[n] == nil {
		w.set[n] = map[chan struct{}]struct{}{}
	}
	w.set[n][c] = struct{}{}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.set[n], c)
		if len(w.set[n]) == 0 {
			delete(w.set, n)
		}
	}
}

// signal sends on each of n's channels that has no signal waiting.
func (w *watches) signal(n name) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.set[n] {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// signalAll signals every watch.
func (w *watches) signalAll() {
	w.mu.Lock()
	names := make([]name, 0, len(w.set))
	for n := range w.set {
		names = append(names, n)
	}
	w.mu.Unlock()
	for _, n := range names {
		w.signal(n)
	}
}
