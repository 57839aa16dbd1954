package migratetest_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// A backend killed under a migrating lease ends it (Done, ErrLeaseLost) by
// its Deadline, and its other side is let go: a process on that side alone
// takes the key only after the migrating lease ended, with a higher fence.
func TestMigratingLeaseEndsWhenASideDies(t *testing.T) {
	postgres := testenv.URL(t, "LOCKER_TEST_POSTGRES").String()
	for _, killed := range []string{"from", "to"} {
		t.Run("killed "+killed, func(t *testing.T) {
			ctx := t.Context()
			srv := testenv.StartRedis(t, 0)
			redisURL := "redis://" + srv.Addr
			from, to := redisURL, postgres
			if killed == "to" {
				from, to = postgres, redisURL
			}
			mig, err := locker.Open(ctx, migrateURL(from, to))
			if err != nil {
				t.Fatal(err)
			}
			defer mig.Close()
			survivor := postgres
			other, err := locker.Open(ctx, survivor) // a process on the surviving side alone
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			key := "migrate-fault-" + rand.Text()
			lease, err := mig.Lock(ctx, key, locker.WithTTL(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			srv.Kill()
			if l, err := other.TryLock(ctx, key); err == nil || !errors.Is(err, locker.ErrLocked) {
				if l != nil {
					_ = l.Unlock(ctx)
				}
				t.Fatalf("the surviving side while the migrating lease lives: %v, want ErrLocked", err)
			}
			select {
			case <-lease.Done():
			case <-time.After(time.Until(lease.Deadline()) + 2*time.Second):
				t.Fatalf("Done not closed by the Deadline (+2s) after %s was killed", killed)
			}
			if !errors.Is(lease.Err(), locker.ErrLeaseLost) {
				t.Fatalf("Err: %v, want ErrLeaseLost", lease.Err())
			}
			// Let go after Done closed (the surviving side's keep-alive
			// would keep it for good otherwise): a Lock there is granted.
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			next, err := other.Lock(wctx, key)
			if err != nil {
				t.Fatalf("the surviving side once the lease ended: %v; want it let go", err)
			}
			if next.Fence() <= lease.Fence() {
				t.Fatalf("fence %d on the surviving side after the migrating lease's %d", next.Fence(), lease.Fence())
			}
			_ = next.Unlock(ctx)
		})
	}
}
