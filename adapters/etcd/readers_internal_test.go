package etcd

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// Readers arriving together at a key that readers hold each take one txn
// (the one that queues their entry and reads the entries before it), all
// admitted at once. A Lock that first read the queue and then put its
// entry only if no entry had come since failed whenever another reader
// came between, and started over: eight readers ran one at a time.
func TestReadersJoinInOneTxnEach(t *testing.T) {
	t.Parallel()
	const n = 8
	d, c, _ := countedDriver(t)
	l := locker.New(d)
	defer l.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	key := "readers"
	first, err := l.Lock(ctx, key, locker.Shared())
	if err != nil {
		t.Fatal(err)
	}
	before := c.txn.Load()
	leases := make([]locker.Lease, n)
	var wg sync.WaitGroup
	for i := range leases {
		wg.Go(func() {
			var err error
			if leases[i], err = l.Lock(ctx, key, locker.Shared()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if used := c.txn.Load() - before; used > n {
		t.Errorf("%d readers joining readers took %d txns; want one each", n, used)
	}
	for _, le := range append(leases, first) {
		if err := le.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
}

// A Locker's waits share one watch stream, which it keeps open: a stream
// whose last watch ends is closed by the client, so each wait would
// otherwise open a stream of its own. And its waits on one key share one
// watch of the key's queue (queuewatch.go): with a watch set up per wait,
// etcd serves one in fifty or so late under contention.
func TestWaitsShareOneWatchStream(t *testing.T) {
	t.Parallel()
	const waits = 5
	tt := newTurnTaker(t) // the test's own watches (tt.direct): not counted
	d, c := tt.d, tt.calls
	ctx := t.Context()
	for i := range waits {
		lease, err := tt.holder.Lock(ctx, "turns")
		if err != nil {
			t.Fatal(err)
		}
		done := testenv.LockInTurn(ctx, tt.waiter, "turns")
		queuedBehind(t, tt.direct, d.queue(0, "turns"), 2)
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("wait %d: %v", i, err)
		}
	}
	if n := c.watchStreams.Load(); n != 1 {
		t.Errorf("%d waits opened %d watch streams; want 1, kept open", waits, n)
	}
	if n := c.watches.Load(); n != 2 {
		t.Errorf("%d waits asked for %d watches; want 2: the stream's anchor and the queue's", waits, n)
	}
}

// queuedBehind waits until the queue prefix q holds n entries.
func queuedBehind(t *testing.T, c *clientv3.Client, q string, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	wch := c.Watch(ctx, q, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	for {
		resp, err := c.Get(ctx, q, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count >= n {
			return
		}
		select {
		case <-wch: // a change: count again
		case <-ctx.Done():
			t.Fatal(errors.New("the waiter's entry never queued"))
		}
	}
}
