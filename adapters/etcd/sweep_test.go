package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/adapters/etcd"
	"github.com/locker-go/locker/conformance/faultproxy"
)

// A cancelled Lock whose clean-up fails leaves its entry on the Locker's
// shared etcd lease, which the Locker's other locks keep alive. The
// background sweep deletes it once the server answers again, without
// waiting for another Lock call on that Locker.
func TestOrphanSweptInBackground(t *testing.T) {
	b := testBackend(t)
	h := harness(t, false)
	p, err := faultproxy.New(b.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c := client(t, p.Addr())
	l, err := etcd.New(c, etcd.WithPrefix(b.prefix), etcd.WithRequestTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	holder, other := newLocker(t, b), newLocker(t, b)
	ctx := ctxT(t)
	p0 := uniq(t)
	keep, key := p0+"keep", p0+"lock" // neither a prefix of the other, for Count
	const ttl = 30 * time.Second      // far beyond the test: the lease must not lapse

	kept, err := l.Lock(ctx, keep, locker.WithTTL(ttl)) // keeps the shared lease alive
	if err != nil {
		t.Fatal(err)
	}
	held, err := holder.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make(chan error, 1)
	go func() {
		_, err := l.Lock(wctx, key, locker.WithTTL(ttl)) // on the same shared lease
		res <- err
	}()
	for count(t, h, key) != 2 { // a condition on the server: poll it
		time.Sleep(5 * time.Millisecond)
	}

	p.Cut() // the cancelled Lock's clean-up cannot reach etcd
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Lock = %v, want context.Canceled", err)
	}
	if n := count(t, h, key); n != 2 {
		t.Fatalf("%d entries for the key with the clean-up cut off, want 2 (the holder's and the orphan)", n)
	}

	c.SetEndpoints(b.addr) // etcd is reachable again; no further call on l
	deadline := time.Now().Add(20 * time.Second)
	for count(t, h, key) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the orphaned entry is still there 20s after etcd came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := kept.Err(); err != nil {
		t.Fatalf("the lock keeping the shared lease alive ended: %v", err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if lease, err := other.TryLock(ctx, key); err != nil {
		t.Errorf("TryLock after the holder left = %v; the key is still blocked", err)
	} else {
		_ = lease.Unlock(ctx)
	}
	if err := kept.Unlock(ctx); err != nil {
		t.Errorf("Unlock of the kept lock = %v", err)
	}
}
