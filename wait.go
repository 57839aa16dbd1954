package locker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locker-go/locker/driver"
)

// minFallback bounds the fallback timer from below, so a holder whose TTL
// is about to lapse does not turn the wait into a busy spin.
const minFallback = time.Millisecond

// wait is Lock's loop: attempt, and while another owner holds the key,
// sleep until the driver notifies a release or the holder's remaining TTL
// runs out. There is no fixed poll interval. A subscription that fails as
// unavailable while the attempts succeed (pub/sub slow to connect, or
// down) does not fail the Lock: it waits on the timer, subscribing again
// each turn. The first attempt is made
// before subscribing, so an uncontended Lock costs one round trip, unless
// the driver listens already (then it subscribes first, for free); every
// later attempt is made while subscribed, so no release slips between an
// attempt and the wait. A Lock whose ctx ends while another owner holds
// the key returns an error matching both ErrLocked and ctx.Err().
func (p *portable) wait(ctx context.Context, r *driver.Request) (granted, error) {
	var wake <-chan struct{}
	subscribe := func() (stop func(), err error) {
		wake, stop, err = p.notifier.Subscribe(ctx, r)
		if r.Queue = err == nil; err != nil {
			wake = nil // subscribed again at the next turn
		}
		return stop, err
	}
	if p.listening(r) { // failing after all, it goes on as where it is not free
		if stop, err := subscribe(); err == nil {
			defer stop()
		}
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	refused := false // another owner held the key when we last looked
	// soon is the fallback for a refusal that says "look again at once"
	// (Retry <= 0): doubled while such refusals repeat, so that a holder
	// whose release is slow to show does not turn the wait into polling.
	soon := minFallback
	for {
		g, retry, err := p.try(ctx, r)
		if refused && err != nil && ctx.Err() != nil {
			return granted{}, fmt.Errorf("%w: %q: %w", ErrLocked, r.Key, ctx.Err())
		}
		if !errors.Is(err, ErrLocked) {
			return g, err
		}
		refused = true
		if wake == nil && p.notifier != nil {
			stop, err := subscribe()
			switch {
			case err == nil:
				defer stop() // runs once: wake is set from now on
				continue
			case ctx.Err() != nil:
				return granted{}, fmt.Errorf("%w: %q: %w", ErrLocked, r.Key, ctx.Err())
			case !errors.Is(err, ErrUnavailable):
				return granted{}, err
			}
			// The backend answers but its notifications do not (yet): wait
			// on the timer alone, and subscribe again at the next turn.
		}
		if retry > 0 {
			soon = minFallback
		} else {
			retry, soon = soon, min(2*soon, max(r.TTL/3, minFallback))
		}
		timer.Reset(max(retry, minFallback))
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			return granted{}, fmt.Errorf("%w: %q: %w", ErrLocked, r.Key, ctx.Err())
		}
	}
}

// listening reports whether subscribing for r costs no round trip now
// (driver.KeyListener, else driver.Notifier's Listening); false without a
// Notifier. Should that subscription fail after all (a Redis Cluster
// shard subscription that ended since ListeningFor said yes, its master
// now out of reach), the Lock goes on as where subscribing is not free:
// it attempts, unqueued, and subscribes after a refusal.
func (p *portable) listening(r *driver.Request) bool {
	if kl, ok := p.notifier.(driver.KeyListener); ok {
		return kl.ListeningFor(r)
	}
	return p.notifier != nil && p.notifier.Listening()
}
