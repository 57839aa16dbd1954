package etcd

import (
	"crypto/rand"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// Lockers opened on one URL but for the path share a client and the
// watches of their waiters' queues: a queue's change reaches the process
// once. A shared watch belongs to the client, not to the Locker that set
// it up: it goes on serving the others' waiters when that one closes, and
// ends with the client, after the last Locker on the URL. Another URL
// (here another timeout) has a client of its own.
func TestLockersOnOneURLShareAClient(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := testenv.URL(t, "LOCKER_TEST_ETCD")
	withTimeout := func(path, timeout string) *etcdDriver {
		v := *u
		v.Path = path
		q := v.Query()
		q.Set("timeout", timeout) // a client no other test shares
		v.RawQuery = q.Encode()
		d, err := openDriver(ctx, &v)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b, c := withTimeout("/share-a", "4321ms"), withTimeout("/share-b", "4321ms"), withTimeout("/share-a", "4322ms")
	la, lb, lc := a.locker(), b.locker(), c.locker()
	t.Cleanup(func() { la.Close(); lb.Close(); lc.Close() })
	if a.client != b.client || a.waits != b.waits || c.client == a.client || c.waits == a.waits {
		t.Fatalf("clients shared: a and b %v, a and c %v; watches: %v, %v; want a and b alone to share both",
			a.client == b.client, a.client == c.client, a.waits == b.waits, a.waits == c.waits)
	}
	queue := a.queue(driver.Plain, "share-"+rand.Text())
	wa, leaveA := a.listen(queue) // a sets the watch up
	wb, leaveB := b.listen(queue)
	defer leaveB()
	next(t, wa)
	next(t, wb)
	a.waits.mu.Lock()
	subs := len(a.waits.m[queue].subs)
	a.waits.mu.Unlock()
	if subs != 2 {
		t.Fatalf("the queue's watch has %d waiters, want a's and b's on one", subs)
	}
	if _, err := a.client.Put(ctx, queue+"e", ""); err != nil {
		t.Fatal(err)
	}
	if resp := next(t, wb); len(resp.Events) != 1 {
		t.Fatalf("b's waiter heard %+v, want the put", resp)
	}
	leaveA()
	if err := la.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.Delete(ctx, queue+"e"); err != nil {
		t.Fatal(err)
	}
	if resp := next(t, wb); len(resp.Events) != 1 { // the same watch, after a closed
		t.Fatalf("b's waiter heard %+v after a closed, want the delete", resp)
	}
	if err := lb.Close(); err != nil {
		t.Fatal(err)
	}
	ended(t, wb) // the client's watches end with it
	if a.client.Ctx().Err() == nil {
		t.Fatal("the client outlived the last Locker on its URL")
	}
	if _, err := c.client.Get(ctx, queue); err != nil {
		t.Fatalf("another URL's client, after the first's closed: %v", err)
	}
}

// ended waits up to 10 s for wch to close, past any responses left in it.
func ended(t *testing.T, wch clientv3.WatchChan) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-wch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("the watch did not end in 10 s")
		}
	}
}
