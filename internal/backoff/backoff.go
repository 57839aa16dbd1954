// Package backoff is the one retry loop that drivers share: try, and after
// a failure worth retrying wait a delay that doubles from Min up to Max
// (with jitter, if asked) before trying again, until the work is done or
// the context ends. A driver supplies only the attempt.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is how Retry spaces its attempts.
type Policy struct {
	Min, Max time.Duration
	// Jitter waits a random time between half the delay and the delay, so
	// that clients failing together do not retry together.
	Jitter bool
	// Until, if set, is when retrying ends: a wait that would end after
	// it is not begun.
	Until time.Time
}

// Retry calls attempt until it reports done, waiting between attempts as
// p says, and returns true; or returns false once ctx ends, or when the
// next wait would end after p.Until. The first attempt is made at once.
func Retry(ctx context.Context, p Policy, attempt func(ctx context.Context) (done bool)) bool {
	delay := p.Min
	for {
		if attempt(ctx) {
			return true
		}
		wait := delay
		if p.Jitter {
			wait = delay/2 + rand.N(delay/2+1)
		}
		if !p.Until.IsZero() && time.Now().Add(wait).After(p.Until) || !Sleep(ctx, wait) {
			return false
		}
		delay = min(2*delay, p.Max)
	}
}

// Sleep waits d and returns true, or returns false when ctx ends first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Until returns a context that ends when any of chans closes (or parent
// ends), for loops that stop on a driver's quit channels. Call cancel when
// done.
func Until(parent context.Context, chans ...<-chan struct{}) (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancel = context.WithCancel(parent)
	for _, c := range chans {
		go func() {
			select {
			case <-c:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}
