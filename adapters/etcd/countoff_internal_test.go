package etcd

import (
	"context"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// turnTaker is a waiter's Locker, with its calls counted, beside a
// holder's Locker on the same keys, and a client of the test's own.
type turnTaker struct {
	waiter, holder locker.Locker
	d              *etcdDriver
	calls          *calls
	direct         *clientv3.Client
}

func newTurnTaker(t *testing.T) *turnTaker {
	d, n, _ := countedDriver(t)
	_, _, direct := countedDriver(t)
	u := testenv.URL(t, "LOCKER_TEST_ETCD")
	u.Path = d.prefix
	holder, err := locker.Open(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close() })
	waiter := locker.New(d)
	t.Cleanup(func() { waiter.Close() })
	return &turnTaker{waiter: waiter, holder: holder, d: d, calls: n, direct: direct}
}

// turn has the waiter queue behind the holder's leases on key (n: one,
// or a semaphore's n), then calls between (the wait begun), releases the
// holder's first lease, and returns the waiter's lease with the txns its
// Locker sent after between. All lock with opts.
func (tt *turnTaker) turn(t *testing.T, key string, n int, between func(), opts ...locker.Option) (locker.Lease, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var held locker.Lease
	for i := range n {
		lease, err := tt.holder.Lock(ctx, key, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			held = lease
		} else {
			defer lease.Unlock(ctx)
		}
	}
	got := make(chan locker.Lease, 1)
	go func() {
		lease, err := tt.waiter.Lock(ctx, key, opts...)
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	queuedBehind(t, tt.direct, tt.d.queue(driver.Plain, key), int64(n)+1)
	listening(t, tt.d, tt.d.queue(driver.Plain, key))
	between()
	before := tt.calls.txn.Load()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lease := <-got
	if lease == nil {
		t.FailNow()
	}
	return lease, tt.calls.txn.Load() - before
}

// A waiter near the head of the queue that heard, through its Locker's
// watch of the queue, every entry before it go holds the key with no
// call: a read would cost as much as the hand-off's write did. The first
// wait may read (the Locker's watch of the queue began after the waiter
// queued); the next waits within the watch's linger do not. The same
// for a semaphore's waiter, which counts off every entry before it.
func TestHandOffTakesNoRead(t *testing.T) {
	t.Parallel()
	for name, n := range map[string]int{"Exclusive": 1, "Limit(2)": 2} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var opts []locker.Option
			if n > 1 {
				opts = append(opts, locker.Limit(n))
			}
			tt := newTurnTaker(t)
			for i := range 3 {
				lease, txns := tt.turn(t, "turns", n, func() {}, opts...)
				if i > 0 && txns != 0 {
					t.Errorf("wait %d: the waiter sent %d txns between the holder's release and its grant, want none", i, txns)
				}
				if err := lease.Unlock(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A Locker's first wait on a key begins its watch of the queue after the
// waiter queued: with other clients writing to etcd meanwhile (any key's
// write may hide a change of the queue), it reads once as the watch
// begins, and counts off from there: the hand-off takes no read of its
// own (a read at each end made three txns of the wait).
func TestFirstWaitReadsOnce(t *testing.T) {
	t.Parallel()
	tt := newTurnTaker(t)
	ctx, stop := context.WithCancel(t.Context())
	var busy sync.WaitGroup
	busy.Go(func() {
		for ctx.Err() == nil {
			_, _ = tt.direct.Put(ctx, tt.d.prefix+"busy", "x")
		}
	})
	before := tt.calls.txn.Load()
	lease, _ := tt.turn(t, "first", 1, func() {})
	if txns := tt.calls.txn.Load() - before; txns > 2 {
		t.Errorf("the first wait sent %d txns, want 2 at most: its queueing, and a read as its watch began", txns)
	}
	stop()
	busy.Wait()
	if err := lease.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A waiter whose own entry goes while it waits (its etcd lease ended, or
// a ForceUnlock: etcd issue 11456) does not take the key when the
// entries before it go, though its watch showed nothing else: it queues
// again, and holds the key through a live entry of its own.
func TestWaiterWhoseEntryWentQueuesAgain(t *testing.T) {
	t.Parallel()
	tt := newTurnTaker(t)
	warm, _ := tt.turn(t, "gone", 1, func() {}) // the Locker's watch of the queue, lingering
	if err := warm.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	q := tt.d.queue(driver.Plain, "gone")
	lease, _ := tt.turn(t, "gone", 1, func() {
		resp, err := tt.direct.Get(t.Context(), q, clientv3.WithLastCreate()...)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("the waiter's entry: %v, %v", resp, err)
		}
		if _, err := tt.direct.Delete(t.Context(), string(resp.Kvs[0].Key)); err != nil {
			t.Fatal(err)
		}
	})
	defer lease.Unlock(t.Context())
	resp, err := tt.direct.Get(t.Context(), q, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 1 {
		t.Errorf("the waiter holds the key with %d entries in the queue, want its own new one", resp.Count)
	}
}

// listening waits until a waiter listens to d's watch of the queue q: a
// release between the waiter's queueing and that would call for a read.
func listening(t *testing.T, d *etcdDriver, q string) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); <-tick.C {
		d.waits.mu.Lock()
		w := d.waits.m[q]
		n := 0
		if w != nil {
			n = len(w.subs)
		}
		d.waits.mu.Unlock()
		if n > 0 {
			return
		}
	}
	t.Fatal("the waiter never listened to its Locker's watch of the queue")
}
