// Package wait holds the loop every adapter's Lock runs: try, and while the
// key is held, sleep until the backend notifies a release or the holder's
// remaining TTL runs out. There is no fixed poll interval anywhere.
package wait

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locker-go/locker"
)

// Attempt makes one try. When the key is held it returns an error matching
// locker.ErrLocked and how long until the holder's lease would lapse (<= 0
// if unknown); that is the fallback timer should no notification come.
type Attempt func(ctx context.Context) (locker.Lease, time.Duration, error)

// Subscribe starts delivery of release notifications for the key on the
// returned channel, which must hold at least one pending signal so that no
// release between subscribing and waiting is missed. It returns only once
// the backend has confirmed the subscription. unsubscribe ends it.
type Subscribe func(ctx context.Context) (wake <-chan struct{}, unsubscribe func(), err error)

// MinFallback bounds the fallback timer from below, so a holder whose TTL is
// about to lapse does not turn the loop into a busy spin.
const MinFallback = time.Millisecond

// Until runs attempt until it acquires, fails with anything but ErrLocked,
// or ctx ends. The first attempt runs before subscribing, so an uncontended
// Lock costs one round trip; later attempts run after subscribing, so a
// release can never slip between an attempt and the wait.
func Until(ctx context.Context, key string, attempt Attempt, subscribe Subscribe) (locker.Lease, error) {
	l, _, err := attempt(ctx)
	if !errors.Is(err, locker.ErrLocked) {
		return l, CtxErr(ctx, key, err)
	}
	wake, unsubscribe, err := subscribe(ctx)
	if err != nil {
		return nil, CtxErr(ctx, key, err)
	}
	defer unsubscribe()
	return Subscribed(ctx, key, attempt, wake)
}

// Subscribed is the loop of Until for a waiter whose wake channel was live
// before its first attempt (an adapter whose subscription outlives single
// calls), so that no release between them is missed: attempt, and while
// the key is held sleep until wake or the fallback timer.
func Subscribed(ctx context.Context, key string, attempt Attempt, wake <-chan struct{}) (locker.Lease, error) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		l, retry, err := attempt(ctx)
		if !errors.Is(err, locker.ErrLocked) {
			return l, CtxErr(ctx, key, err)
		}
		timer.Reset(max(retry, MinFallback))
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			return nil, CtxErr(ctx, key, ctx.Err())
		}
	}
}

// CtxErr turns err into what Lock returns once ctx has ended: ErrClosed
// when the Locker's Close ended it, else an error matching ctx.Err(). Other
// errors pass through.
func CtxErr(ctx context.Context, key string, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	if errors.Is(context.Cause(ctx), locker.ErrClosed) {
		return locker.ErrClosed
	}
	return fmt.Errorf("locker: lock %q: %w", key, ctx.Err())
}
