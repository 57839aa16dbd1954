package etcd

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// A Locker names its next entry of a queue as one it deleted itself
// (names.go): one key taken and released 30 times, then handed back and
// forth between two Lockers 10 times, creates one name per Locker, so
// etcd's index does not fill with deleted names that every range over the
// queue walks.
func TestEntryNamesReused(t *testing.T) {
	a, d, c := testLocker(t)
	b, _, _ := testLocker(t)
	ctx := t.Context()
	key := "names-" + rand.Text()
	start, err := c.Get(ctx, "names-rev")
	if err != nil {
		t.Fatal(err)
	}
	for range 30 {
		l, err := a.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		held, err := a.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got := testenv.LockInTurn(ctx, b, key)
		queuedBehind(t, c, d.queue(driver.Plain, key), 2)
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}
	names := map[string]bool{}
	if n := queueLen(t, d, c, key); n != 0 {
		t.Fatalf("queue left: %d entries", n)
	}
	w := c.Watch(ctx, d.queue(driver.Plain, key), clientv3.WithPrefix(), clientv3.WithRev(start.Header.Revision+1), clientv3.WithFilterDelete())
	for seen := 0; seen < 50; {
		ev := <-w
		if err := ev.Err(); err != nil {
			t.Fatal(err)
		}
		for _, e := range ev.Events {
			if e.Type == mvccpb.PUT && e.Kv.Version == 1 { // a creation
				names[string(e.Kv.Key)] = true
				seen++
			}
		}
	}
	if len(names) != 2 {
		t.Errorf("50 entries had %d names; want 2, one per Locker", len(names))
	}
}

// A name given back whose key is not free after all (say the bookkeeping
// erred) is never written over: the Lock that drew it takes another name,
// and queues behind the entry there, which keeps its record.
func TestEntryNameTakenIsNotOverwritten(t *testing.T) {
	l, d, c := testLocker(t)
	ctx := t.Context()
	key := "names-taken-" + rand.Text()
	q := d.queue(driver.Plain, key)
	name := q + d.names.id + "taken"
	foreign := record{Owner: "someone-else", Holds: []string{"h"}}.encode()
	if _, err := c.Put(ctx, name, foreign); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Delete(context.Background(), name) })
	d.names.give(name)
	for _, try := range []func(context.Context, string, ...locker.Option) (locker.Lease, error){l.TryLock, lockBriefly(l)} {
		lease, err := try(ctx, key)
		if !errors.Is(err, locker.ErrLocked) {
			t.Errorf("a lock behind the entry at the name given back: %v, %v; want ErrLocked", lease, err)
		}
		got, err := c.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != foreign {
			t.Fatalf("the entry at the name given back was written over: %v", got.Kvs)
		}
		d.names.give(name) // again, for the next way of taking it
	}
}

// lockBriefly is l.Lock with a short wait: a Lock queues at once, through
// the txn that also reads the entries before its own.
func lockBriefly(l locker.Locker) func(context.Context, string, ...locker.Option) (locker.Lease, error) {
	return func(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		return l.Lock(ctx, key, opts...)
	}
}
