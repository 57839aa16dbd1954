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

// Announce publishes with the default options too: it took the node
// timeout as configured, zero unless WithNodeTimeout set it, so that
// every publish's ctx had ended before it began, and none went out.
func TestAnnounceWithDefaultOptions(t *testing.T) {
	ctx := t.Context()
	_, clients := plainLocker(t)
	l, err := newTestLocker(clients) // no WithNodeTimeout
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Locker.Close() })
	key := uniqueKey(t, "announce")
	changed, stop, err := l.redlock.Watch(ctx, driver.Plain, key)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := l.redlock.Announce(ctx, driver.Plain, key); err != nil {
		t.Fatalf("Announce with the default options = %v", err)
	}
	testenv.Signalled(t, changed, "the announcement")
}
