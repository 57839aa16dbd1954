package testenv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/locker-go/locker"
)

// KeepMany takes n leases on keys "0".."n-1" through l, eight at a time, with
// ttl and keep-alive, runs between (if not nil), lets three TTLs pass and
// fails t if any lease ended or is past its Deadline. It returns how much
// count (a backend call counter) grew over the three TTLs.
func KeepMany(t testing.TB, l locker.Locker, n int, ttl time.Duration, count func() int64, between func()) int64 {
	t.Helper()
	leases := TakeMany(t, l, n, ttl)
	if between != nil {
		between()
	}
	before := count()
	time.Sleep(3 * ttl) // the keep-alive at work is what is measured
	used := count() - before
	for _, lease := range leases {
		if lease.Err() != nil || !lease.Deadline().After(time.Now()) {
			t.Fatalf("lease %s ended: %v (deadline %v)", lease.Key(), lease.Err(), lease.Deadline())
		}
	}
	return used
}

// TakeMany has l take n exclusive kept-alive leases of ttl, on keys "0"
// to "n-1", several at once, so that they are taken close together even
// on a slow machine, as a busy Locker's would be.
//
// A take that finds the backend unavailable is tried again, up to twice
// (logged): a loaded machine may stall a reply past a short per-call
// timeout (Redlock's masters, unanswered past 500 ms in a -race run beside
// other packages' tests), and what the callers measure is the keep-alive
// of the leases, not such a stall. A refusal, or any other error, fails t.
func TakeMany(t testing.TB, l locker.Locker, n int, ttl time.Duration) []locker.Lease {
	t.Helper()
	leases := make([]locker.Lease, n)
	errs := make([]error, n)
	take := func(key string) (lease locker.Lease, err error) {
		for try := range 3 {
			lease, err = l.TryLock(context.Background(), key, locker.WithTTL(ttl))
			if !errors.Is(err, locker.ErrUnavailable) {
				return lease, err
			}
			t.Logf("taking %s, try %d: %v", key, try+1, err)
		}
		return lease, err
	}
	var wg sync.WaitGroup
	const takers = 8 // quickly, and few enough for Redlock's short per-master timeout
	for w := range takers {
		wg.Go(func() {
			for i := w; i < n; i += takers {
				leases[i], errs[i] = take(fmt.Sprint(i))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return leases
}

// LockInTurn has l Lock key in a goroutine, and Unlock it once held; the
// channel receives the first error, or nil once the key was held and let
// go: a waiter behind a holder, for a test to release the holder meanwhile.
func LockInTurn(ctx context.Context, l locker.Locker, key string) <-chan error {
	done := make(chan error, 1)
	go func() {
		lease, err := l.Lock(ctx, key)
		if err == nil {
			err = lease.Unlock(ctx)
		}
		done <- err
	}()
	return done
}
