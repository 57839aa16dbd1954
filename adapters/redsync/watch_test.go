package redsync

import (
	"context"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// A watch on an election hears its leader's grant and resignation (the
// Locker's announcements, on a quorum of masters), from another Locker;
// waiters on the election take no announcement for a release.
func TestWatchHearsAnnouncements(t *testing.T) {
	ctx := context.Background()
	watcher, _ := plainLocker(t)
	leader, _ := plainLocker(t)
	election := uniqueKey(t, "e")
	changed, stop, err := watcher.redlock.Watch(ctx, driver.Subtree, election+"/")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	lead, err := locker.Campaign(ctx, leader.Locker, election)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Signalled(t, changed, "the leader's grant")
	next := make(chan testenv.LockResult, 1)
	go func() {
		l, err := locker.Campaign(ctx, watcher.Locker, election)
		next <- testenv.LockResult{Lease: l, Err: err}
	}()
	if err := lead.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Signalled(t, changed, "the leader's resignation")
	select {
	case r := <-next:
		if r.Err != nil || r.Lease.Fence() <= lead.Fence() {
			t.Fatalf("the next candidate: %s; want a term above %d", testenv.Outcome(r.Lease, r.Err), lead.Fence())
		}
		_ = r.Lease.Unlock(ctx)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting candidate did not lead within 5s of the resignation")
	}
}
