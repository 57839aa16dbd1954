package etcd

import (
	"crypto/rand"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// Lockers opened on one URL but for the path share a client and the
// watches of their waiters' queues: a queue's change reaches the process
// once. The watch runs in the Locker that set it up; when that one
// closes, the others' waiters are told (their channel closes) and listen
// again on a watch of their own. The client closes with the last Locker;
// another URL (here another timeout) has a client of its own.
func TestLockersOnOneURLShareAClient(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := testenv.URL(t, "LOCKER_TEST_ETCD")
	q := u.Query()
	q.Set("timeout", "4321ms") // a client no other test shares
	u.RawQuery = q.Encode()
	open := func(path string) *etcdDriver {
		v := *u
		v.Path = path
		d, err := openDriver(ctx, &v)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b := open("/share-a"), open("/share-a")
	other := *u
	other.RawQuery = "timeout=4322ms"
	c, err := openDriver(ctx, &other)
	if err != nil {
		t.Fatal(err)
	}
	la, lb, lc := a.locker(), b.locker(), c.locker()
	t.Cleanup(func() { la.Close(); lb.Close(); lc.Close() })
	if a.client != b.client || a.waits != b.waits || c.client == a.client || c.waits == a.waits {
		t.Fatalf("clients shared: a and b %v, a and c %v; watches: %v, %v; want a and b alone to share both",
			a.client == b.client, a.client == c.client, a.waits == b.waits, a.waits == c.waits)
	}
	queue := a.queue(driver.Plain, "share-"+rand.Text())
	wa, leaveA := a.listen(queue)
	defer leaveA()
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
	if err := la.Close(); err != nil { // its watch ends with it
		t.Fatal(err)
	}
	ended(t, wb)                 // b's waiter is told
	wb, leaveB = b.listen(queue) // a watch of b's own, on the client b still holds
	defer leaveB()
	next(t, wb)
	if _, err := b.client.Delete(ctx, queue+"e"); err != nil {
		t.Fatal(err)
	}
	if resp := next(t, wb); len(resp.Events) != 1 {
		t.Fatalf("b's waiter heard %+v after a closed, want the delete", resp)
	}
	key := clientKey(u)
	if err := lb.Close(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(clients.Keys(), key) {
		t.Fatal("the client outlived the last Locker on its URL")
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
