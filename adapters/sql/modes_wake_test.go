package sql

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// wakeCase is one run of a test below: a Locker whose key another call
// holds for ttl, a context that ends well before the waiters' fallback
// retry (TTL/3), and the number of key's places in the queue.
type wakeCase struct {
	l      locker.Locker
	key    string
	held   locker.Lease
	wctx   context.Context
	queued func(n int) func() bool
}

// wakeTTL is the leases' TTL: their fallback retry, TTL/3, outlasts wctx.
const wakeTTL = 30 * time.Second

// pollers runs test on the dialects whose waiters poll, served in each
// process by localQueue.
func pollers(t *testing.T, test func(t *testing.T, c wakeCase)) {
	for name, tc := range map[string]struct{ url, count string }{
		"MySQL":  {testenv.URL(t, "LOCKER_TEST_MYSQL").String(), "SELECT COUNT(*) FROM locker_locks_queue WHERE `key` = ?"},
		"SQLite": {"sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "wake.db")), `SELECT COUNT(*) FROM locker_locks_queue WHERE "key" = ?`},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			l, err := Open(ctx, tc.url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			c := wakeCase{l: l, key: "wake-" + rand.Text()}
			if c.held, err = l.Lock(ctx, c.key, locker.WithTTL(wakeTTL)); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			c.wctx = wctx
			c.queued = func(n int) func() bool {
				return func() bool {
					var got int
					err := driverOf(l).db.QueryRowContext(ctx, tc.count, c.key).Scan(&got)
					return err == nil && got == n
				}
			}
			test(t, c)
		})
	}
}

// A process's waiters are served in the queue's order whatever their
// modes: a shared waiter queued before an exclusive one is first here
// too, so that the one this process lets poll is the one whose turn it is.
// (The shared waiter once had no known place here and fell behind the
// exclusive one, which polled and was refused, the shared one ahead of it
// in the database: both waited for their TTL/3 fallback. In a read-heavy
// mix on MySQL, 2.8 lock calls a second.) Then, granted, the shared waiter wakes
// the shared one behind it, which the writer's hold does not exclude once
// the writer has gone.
func TestServesModesInQueueOrder(t *testing.T) {
	pollers(t, testServesModesInQueueOrder)
}

func testServesModesInQueueOrder(t *testing.T, c wakeCase) {
	ctx := t.Context()
	lock := func(opts ...locker.Option) <-chan error {
		done := make(chan error, 1)
		go func() {
			lease, err := c.l.Lock(c.wctx, c.key, append(opts, locker.WithTTL(wakeTTL))...)
			if err == nil {
				err = lease.Unlock(ctx)
			}
			done <- err
		}()
		return done
	}
	reader := lock(locker.Shared())
	waitFor(t, "the reader queues", c.queued(1))
	writer := lock()
	waitFor(t, "the writer queues behind it", c.queued(2))
	second := lock(locker.Shared())
	waitFor(t, "a second reader queues behind the writer", c.queued(3))
	if err := c.held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for name, done := range map[string]<-chan error{"reader": reader, "writer": writer, "second reader": second} {
		if err := <-done; err != nil {
			t.Errorf("%s: %v (not woken in its turn)", name, err)
		}
	}
}

// Readers queued behind a writer all hold together once it goes: the
// first one granted wakes the next (its grant admits it), though it is
// this process's first waiter until its Lock returns.
func TestReadersHoldTogether(t *testing.T) { pollers(t, testReadersHoldTogether) }

func testReadersHoldTogether(t *testing.T, c wakeCase) {
	ctx := t.Context()
	const readers = 3
	got := make(chan locker.Lease, readers)
	for i := range readers {
		go func() {
			lease, err := c.l.Lock(c.wctx, c.key, locker.Shared(), locker.WithTTL(wakeTTL))
			if err != nil {
				t.Errorf("reader: %v (not woken while the others held)", err)
			}
			got <- lease
		}()
		waitFor(t, "the reader queues", c.queued(i+1))
	}
	if err := c.held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var leases []locker.Lease
	for range readers { // none lets go until all hold
		if lease := <-got; lease != nil {
			leases = append(leases, lease)
		}
	}
	for _, lease := range leases {
		if err := lease.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
}
