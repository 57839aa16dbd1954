package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/locker-go/locker"
)

// LockResult is what a Lock started in the background (LockAsync) returned.
type LockResult struct {
	Lease locker.Lease
	Err   error
}

// LockAsync starts l.Lock(ctx, key, opts...) in a goroutine and returns the
// channel its result arrives on.
func LockAsync(ctx context.Context, l locker.Locker, key string, opts ...locker.Option) <-chan LockResult {
	out := make(chan LockResult, 1)
	go func() {
		lease, err := l.Lock(ctx, key, opts...)
		out <- LockResult{lease, err}
	}()
	return out
}

// Outcome describes a call's result for a message.
func Outcome(lease locker.Lease, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("granted, fence %d", lease.Fence())
}

// Granted waits up to within for a background Lock's lease; an error, or
// no answer in time, fails t.
func Granted(t testing.TB, who string, ch <-chan LockResult, within time.Duration) locker.Lease {
	t.Helper()
	select {
	case r := <-ch:
		if r.Err != nil {
			t.Fatalf("%s: %v", who, r.Err)
		}
		return r.Lease
	case <-time.After(within):
		t.Fatalf("%s not granted within %v", who, within)
	}
	return nil
}

// StillWaiting fails t if a background Lock returns within d.
func StillWaiting(t testing.TB, who string, ch <-chan LockResult, d time.Duration) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: %s; want it to wait", who, Outcome(r.Lease, r.Err))
	case <-time.After(d):
	}
}

// LimitHandOffs checks the hand-offs of a full Limit(2) held by first and
// second, with w1 and w2 waiting in that order: the second holder's
// release (the later one, so that a waiter watching only the earliest
// would miss it) admits w1 alone, the first's then admits w2, each with a
// fence above every earlier one. A waiter must be granted within within,
// and one not yet admitted still waits after wait. It unlocks the
// waiters' leases.
func LimitHandOffs(t testing.TB, first, second locker.Lease, w1, w2 <-chan LockResult, within, wait time.Duration) {
	t.Helper()
	ctx := context.Background()
	StillWaiting(t, "the first waiter of a full Limit(2)", w1, wait)
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	third := Granted(t, "the first waiter, after the second holder's release", w1, within)
	if third.Fence() <= max(first.Fence(), second.Fence()) {
		t.Errorf("the first waiter's fence %d is not above %d and %d", third.Fence(), first.Fence(), second.Fence())
	}
	StillWaiting(t, "the second waiter, after one release", w2, wait)
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	fourth := Granted(t, "the second waiter, after the first holder's release", w2, within)
	if fourth.Fence() <= third.Fence() {
		t.Errorf("the second waiter's fence %d is not above %d", fourth.Fence(), third.Fence())
	}
	for _, l := range []locker.Lease{third, fourth} {
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
}
