package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/adapters/etcd"
	"github.com/locker-go/locker/conformance/faultproxy"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func uniq(t *testing.T) string {
	return "etcd-test-" + strings.ReplaceAll(t.Name(), "/", "_") + "-" + time.Now().Format("150405.000000") + "/"
}

func newLocker(t *testing.T, b backend) locker.Locker { return newLockerB(t, b) }

func newLockerB(t testing.TB, b backend) locker.Locker {
	l, err := etcd.New(client(t, b.addr), etcd.WithPrefix(b.prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestOpen(t *testing.T) {
	u := testBackendURL(t)
	ctx := ctxT(t)
	l, err := locker.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	key := uniq(t) + "k"
	lease, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, locker.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
}

func TestOpenUnreachable(t *testing.T) {
	p, err := faultproxy.New("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	addr := p.Addr()
	p.Close() // nothing listens there any more
	const secret = "s3cret-pw"
	_, err = locker.Open(ctxT(t), "etcd://user:"+secret+"@"+addr+"/x?timeout=300ms")
	if !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("Open of a dead endpoint = %v, want ErrUnavailable", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("error shows the password: %v", err)
	}
}

// A backend that vanishes yields ErrUnavailable, not a call blocked until
// its ctx ends.
func TestUnavailable(t *testing.T) {
	b := testBackend(t)
	p, err := faultproxy.New(b.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	l, err := etcd.New(client(t, p.Addr()), etcd.WithPrefix(b.prefix), etcd.WithRequestTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	key := uniq(t) + "k"
	lease, err := l.TryLock(ctxT(t), key)
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	for op, call := range map[string]func(context.Context, string, ...locker.Option) (locker.Lease, error){"Lock": l.Lock, "TryLock": l.TryLock} {
		if _, err := call(ctxT(t), key+"2"); !errors.Is(err, locker.ErrUnavailable) {
			t.Errorf("%s with the backend gone = %v, want ErrUnavailable", op, err)
		}
	}
	if err := lease.Refresh(ctxT(t)); !errors.Is(err, locker.ErrUnavailable) {
		t.Errorf("Refresh with the backend gone = %v, want ErrUnavailable", err)
	}
}

// Keys that are prefixes of each other have queues of their own.
func TestPrefixKeysIndependent(t *testing.T) {
	b := testBackend(t)
	l, other := newLocker(t, b), newLocker(t, b)
	adm := other.(locker.Admin)
	ctx := ctxT(t)
	p := uniq(t)
	keys := []string{p + "a", p + "a/b", p + "ab", p + "a%2Fb"}
	for _, k := range keys {
		if _, err := l.TryLock(ctx, k); err != nil {
			t.Fatalf("TryLock(%q) with the others held: %v", k, err)
		}
	}
	for _, k := range keys {
		info, err := adm.Status(ctx, k)
		if err != nil || info.Key != k || info.Waiters != 0 || info.Holds != 1 {
			t.Errorf("Status(%q) = %+v, %v; want the key, no waiters, 1 hold", k, info, err)
		}
		if time.Until(info.Expires) <= 0 {
			t.Errorf("Status(%q).Expires = %v, want in the future", k, info.Expires)
		}
	}
	list, err := adm.List(ctx, p+"a/")
	if err != nil || len(list) != 1 || list[0].Key != p+"a/b" {
		t.Errorf("List(%q) = %+v, %v; want just %q", p+"a/", list, err, p+"a/b")
	}
	if list, err := adm.List(ctx, p); err != nil || len(list) != len(keys) {
		t.Errorf("List(%q) = %+v, %v; want %d locks", p, list, err, len(keys))
	}
}

// A waiter keeps its etcd lease, and so its place in the queue, alive for
// as long as it waits, even far beyond its TTL.
func TestWaiterOutlivesTTL(t *testing.T) {
	b := testBackend(t)
	h := harness(t, false)
	holder, waiter, later := newLocker(t, b), newLocker(t, b), newLocker(t, b)
	ctx := ctxT(t)
	key := uniq(t) + "k"
	const ttl = 2 * time.Second
	held, err := holder.Lock(ctx, key, locker.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 2)
	wait := func(name string, l locker.Locker) {
		lease, err := l.Lock(ctx, key, locker.WithTTL(ttl))
		if err != nil {
			t.Error(err)
			order <- "error"
			return
		}
		order <- name
		_ = lease.Unlock(ctx)
	}
	go wait("waiter", waiter)
	for count(t, h, key) != 2 {
		time.Sleep(5 * time.Millisecond) // a condition on the server: poll it
	}
	time.Sleep(2*ttl + ttl/2) // the time under test: more than the waiter's TTL
	go wait("later", later)
	for count(t, h, key) != 3 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if first, second := <-order, <-order; first != "waiter" || second != "later" {
		t.Errorf("got the key in order %s, %s; want waiter, later", first, second)
	}
}

// ForceUnlock hands the key to the next waiter, and the holder learns it
// lost the lease at its next refresh.
func TestForceUnlockHandsOff(t *testing.T) {
	b := testBackend(t)
	h := harness(t, false)
	holder, waiter, admin := newLocker(t, b), newLocker(t, b), newLocker(t, b)
	ctx := ctxT(t)
	key := uniq(t) + "k"
	held, err := holder.Lock(ctx, key, locker.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan locker.Lease, 1)
	go func() {
		lease, err := waiter.Lock(ctx, key)
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	for count(t, h, key) != 2 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := admin.(locker.Admin).ForceUnlock(ctx, key); err != nil {
		t.Fatal(err)
	}
	next := <-got
	if next == nil {
		t.Fatal("waiter failed")
	}
	if next.Fence() <= held.Fence() {
		t.Errorf("fence %d after ForceUnlock is not above %d", next.Fence(), held.Fence())
	}
	<-held.Done()
	if !errors.Is(held.Err(), locker.ErrLeaseLost) {
		t.Errorf("force-unlocked lease Err = %v, want ErrLeaseLost", held.Err())
	}
	if err := held.Unlock(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("Unlock after ForceUnlock = %v, want ErrNotHeld", err)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Errorf("the new holder's Unlock = %v", err)
	}
}
