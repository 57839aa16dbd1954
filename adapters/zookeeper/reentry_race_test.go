package zookeeper_test

import (
	"context"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// Two Locks by one owner on one Locker that queue together: when the first
// is released, the second holds the key and must be recorded as the
// owner's hold, so the owner re-enters it (a missed record also escaped the
// session monitor).
func TestSameOwnerQueuedTwiceThenReenters(t *testing.T) {
	l := open(t, testenv.URL(t, "LOCKER_TEST_ZK"))
	ctx := context.Background()
	opts := []locker.Option{locker.WithOwner("same-" + uniq(t)), locker.WithTTL(20 * time.Second)}
	for i := range 20 {
		key := uniq(t) + "/k"
		got := make(chan locker.Lease, 2)
		for range 2 {
			go func() {
				lease, err := l.Lock(ctx, key, opts...)
				if err != nil {
					t.Error(err)
				}
				got <- lease
			}()
		}
		a := <-got
		if a == nil {
			t.FailNow()
		}
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		b := <-got
		if b == nil {
			t.FailNow()
		}
		if b.Fence() != a.Fence() { // b queued behind a and now holds its own node
			c, err := l.TryLock(ctx, key, opts...)
			if err != nil {
				t.Fatalf("round %d: the owner's TryLock on a key it holds = %v, want re-entry", i, err)
			}
			if c.Fence() != b.Fence() {
				t.Errorf("round %d: re-entry fence %d, want %d", i, c.Fence(), b.Fence())
			}
			if err := c.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
