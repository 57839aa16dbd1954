package redsync

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/locker-go/locker"
)

// Shared grants made at once, whose counting the masters interleave in
// different orders, each get a fence of their own (no two holders of a
// key share one), above every fence of the rounds before.
func TestConcurrentSharedFencesDiffer(t *testing.T) {
	ls, _, _ := prefixedLockers(t, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last uint64
	for round := range 25 {
		leases := readersAtOnce(t, ls, round, func(l locker.Locker) (locker.Lease, error) { return l.Lock(ctx, "k", locker.Shared()) })
		if t.Failed() {
			return
		}
		fences := make([]uint64, len(leases))
		for i, l := range leases {
			fences[i] = l.Fence()
		}
		seen := map[uint64]int{}
		for i, f := range fences {
			if j, dup := seen[f]; dup {
				t.Errorf("round %d: readers %d and %d hold the key with one fence %d", round, j, i, f)
			}
			seen[f] = i
			if f <= last {
				t.Errorf("round %d: reader %d's fence %d is not above %d of the round before", round, i, f, last)
			}
		}
		for _, f := range fences {
			last = max(last, f)
		}
		for _, lease := range leases {
			if err := lease.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Readers that try at once all get the key: with none but readers there,
// a TryLock is never refused because the fence claims of the grants made
// with it keep meeting each other (each claim round settles at least one
// of them, so they are claimed until all are).
func TestConcurrentSharedTryLocksAllGranted(t *testing.T) {
	ls, _, _ := prefixedLockers(t, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for round := range 25 {
		leases := readersAtOnce(t, ls, round, func(l locker.Locker) (locker.Lease, error) { return l.TryLock(ctx, "k", locker.Shared()) })
		for _, lease := range leases {
			if lease != nil {
				if err := lease.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		if t.Failed() {
			return
		}
	}
}

// readersAtOnce has every one of ls take the key with take at the same
// moment, and returns their leases (nil where take failed, which fails t).
func readersAtOnce(t *testing.T, ls []*testLocker, round int, take func(locker.Locker) (locker.Lease, error)) []locker.Lease {
	leases := make([]locker.Lease, len(ls))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, l := range ls {
		wg.Go(func() {
			<-start
			lease, err := take(l.Locker)
			if err != nil {
				t.Errorf("round %d, reader %d: %v", round, i, err)
				return
			}
			leases[i] = lease
		})
	}
	close(start)
	wg.Wait()
	return leases
}
