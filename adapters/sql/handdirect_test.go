package sql

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/locker-go/locker"
)

// sqliteHandoff opens a SQLite Locker on a file of its own, and its driver.
func sqliteHandoff(t *testing.T) (locker.Locker, *sqlDriver) {
	t.Helper()
	l, err := Open(t.Context(), "sqlite://"+filepath.ToSlash(filepath.Join(t.TempDir(), "direct.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, driverOf(l)
}

// queueLock locks key in the background, once the key's queue holds
// places places, and returns where its lease (or error) comes.
func queueLock(t *testing.T, ctx context.Context, l locker.Locker, d *sqlDriver, key string, places int, opts ...locker.Option) <-chan locker.Lease {
	t.Helper()
	got := make(chan locker.Lease, 1)
	go func() {
		lease, err := l.Lock(ctx, key, append(opts, locker.WithTTL(time.Minute))...)
		if err != nil && ctx.Err() == nil {
			t.Errorf("lock: %v", err)
		}
		got <- lease
	}()
	waitFor(t, "the waiter queued", func() bool { return queued(t, d, key) == places })
	return got
}

// On SQLite, an Exclusive release whose key this process's first waiter
// waits for, Exclusive, at the head of the queue, hands it the key in one
// statement: the waiter's grant comes with a fence above the last, and
// its place is gone with it (by trigger), the next waiter's kept; so too
// where the two waiters are one owner's (queued before that owner held
// the key, the second does not join the first's hold).
func TestSQLiteHandsOffDirectly(t *testing.T) {
	t.Parallel()
	l, d := sqliteHandoff(t)
	ctx := t.Context()
	key := "direct-" + rand.Text()
	first, err := l.Lock(ctx, key, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	owner := locker.WithOwner("both-waiters")
	w1 := queueLock(t, ctx, l, d, key, 1, owner)
	w2 := queueLock(t, ctx, l, d, key, 2, owner)
	last := first
	for i, w := range []<-chan locker.Lease{w1, w2} {
		direct, taken := d.handoffs.direct.Load(), d.handoffs.count()
		if err := last.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		next := <-w
		if next == nil {
			t.Fatalf("waiter %d: no lease", i+1)
		}
		if next.Fence() <= last.Fence() {
			t.Fatalf("waiter %d's fence %d, not above %d", i+1, next.Fence(), last.Fence())
		}
		if d.handoffs.direct.Load() != direct+1 || d.handoffs.count() != taken+1 {
			t.Fatalf("waiter %d: %d direct hand-offs and %d taken, want 1 and 1", i+1,
				d.handoffs.direct.Load()-direct, d.handoffs.count()-taken)
		}
		if n := queued(t, d, key); n != 1-i {
			t.Fatalf("after waiter %d's grant, %d places, want %d", i+1, n, 1-i)
		}
		last = next
	}
	if err := last.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Where the key is not that plain, the direct hand-off changes nothing
// and the release's transaction decides: a hold of several (re-entry)
// loses one and keeps the key; a place of another process ahead of this
// process's waiter keeps the waiter waiting.
func TestSQLiteDirectHandOffDeclines(t *testing.T) {
	t.Parallel()
	l, d := sqliteHandoff(t)
	ctx := t.Context()
	key := "direct-declines-" + rand.Text()
	owner := locker.WithOwner("re-entrant")
	a, err := l.Lock(ctx, key, owner, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Lock(ctx, key, owner, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := queueLock(t, wctx, l, d, key, 1)
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := d.handoffs.direct.Load(); n != 0 {
		t.Fatalf("%d direct hand-offs from a hold of two", n)
	}
	if info, err := l.(locker.Admin).Status(ctx, key); err != nil || info.Owner != "re-entrant" {
		t.Fatalf("after one of two holds went: %+v (%v), want the owner's", info, err)
	}
	// another process's place, first in the queue
	if _, err := d.db.ExecContext(ctx, `INSERT INTO "`+d.cfg.table+`_queue" ("key", token, mode, seq, expires_at, lim)
VALUES ($1, 'elsewhere', 0, 0, `+nowMS+` + 60000, 0)`, key); err != nil {
		t.Fatal(err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := d.handoffs.direct.Load(); n != 0 {
		t.Fatalf("%d direct hand-offs past another process's place", n)
	}
	if n := queued(t, d, key); n != 2 {
		t.Fatalf("%d places, want the two waiters'", n)
	}
	select {
	case lease := <-w:
		t.Fatalf("the waiter behind another process's place got the key (fence %d)", lease.Fence())
	default:
	}
}
