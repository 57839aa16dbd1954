package redis

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// Semaphores (driver.Limiter) beyond the conformance checks: the release's
// hand-off to the first waiters, n forgotten with the last holder, Status,
// the wakes a ForceUnlock sends, mismatches met by any owner, and batches.

// limited is a TryLock call of owner on key, of Limit n.
func limited(key, owner string, n int) *driver.Request {
	return &driver.Request{Key: key, Owner: owner, Mode: driver.Limited, Limit: n, ID: rand.Text(), TTL: 15 * time.Second}
}

// queued is limited's call as a Lock call, which queues when refused.
func queued(key, owner string, n int) *driver.Request {
	r := limited(key, owner, n)
	r.Queue, r.Wait = true, true
	return r
}

// grant runs the acquire script once for r and returns its grant, which
// must hold.
func grant(t *testing.T, d *redisDriver, r *driver.Request) driver.Grant {
	t.Helper()
	g, err := d.Acquire(t.Context(), r)
	if err != nil || g.Hold == nil {
		t.Fatalf("Acquire(%s of %q) = %+v, %v; want a hold", r.Mode, r.Owner, g, err)
	}
	return g
}

// refused runs the acquire script once for r, which must be refused.
func refused(t *testing.T, d *redisDriver, r *driver.Request) {
	t.Helper()
	if g, err := d.Acquire(t.Context(), r); err != nil || g.Hold != nil {
		t.Fatalf("Acquire(%s of %q) = %+v, %v; want a refusal", r.Mode, r.Owner, g, err)
	}
}

// mismatched runs the acquire script once for r, which must fail with
// ErrModeMismatch.
func mismatched(t *testing.T, d *redisDriver, r *driver.Request) {
	t.Helper()
	if g, err := d.Acquire(t.Context(), r); !errors.Is(err, locker.ErrModeMismatch) {
		t.Errorf("Acquire(%s of %q) = %+v, %v; want ErrModeMismatch", r.Mode, r.Owner, g, err)
	}
}

// listen subscribes to r's wakes, until t ends.
func listen(t *testing.T, d *redisDriver, r *driver.Request) <-chan struct{} {
	t.Helper()
	wake, stop, err := d.Subscribe(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return wake
}

func woken(t *testing.T, wake <-chan struct{}, who string) {
	t.Helper()
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s not woken", who)
	}
}

func notWoken(t *testing.T, wake <-chan struct{}, who string) {
	t.Helper()
	select {
	case <-wake:
		t.Fatalf("%s woken, though the key has no slot for it", who)
	case <-time.After(200 * time.Millisecond):
	}
}

// owners are the owners of key's holders, by fence.
func owners(t *testing.T, d *redisDriver, key string) (locker.LockInfo, []string) {
	t.Helper()
	info, err := d.Status(t.Context(), driver.Plain, key)
	if err != nil {
		t.Fatal(err)
	}
	var os []string
	for _, h := range info.Holders {
		os = append(os, h.Owner)
	}
	return info, os
}

// A release by one holder of a full Limit(2) hands its slot to the first
// waiter, in the script (the waiter holds before it looks), fenced above
// the holders, and not to the second; the next release to the second.
func TestLimitReleaseHandsSlotToFirstWaiter(t *testing.T) {
	d := testDriver(t)
	key := "limit-" + rand.Text()
	a := grant(t, d, limited(key, "a", 2))
	b := grant(t, d, limited(key, "b", 2))
	w1, w2 := queued(key, "w1", 2), queued(key, "w2", 2)
	wake1, wake2 := listen(t, d, w1), listen(t, d, w2)
	refused(t, d, w1)
	refused(t, d, w2)
	if err := a.Hold.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	woken(t, wake1, "the first waiter")
	if info, os := owners(t, d, key); len(os) != 2 || os[0] != "b" || os[1] != "w1" || info.Waiters != 1 {
		t.Fatalf("after a's release: holders %v, %d waiting; want b and w1 holding (handed), w2 waiting", os, info.Waiters)
	}
	g1 := grant(t, d, w1)
	if g1.Fence <= b.Fence {
		t.Errorf("handed fence %d not above the holders' %d, %d", g1.Fence, a.Fence, b.Fence)
	}
	notWoken(t, wake2, "the second waiter")
	refused(t, d, w2)
	if err := b.Hold.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	woken(t, wake2, "the second waiter")
	if g2 := grant(t, d, w2); g2.Fence <= g1.Fence {
		t.Errorf("second handed fence %d not above %d", g2.Fence, g1.Fence)
	}
	if _, os := owners(t, d, key); len(os) != 2 || os[0] != "w1" || os[1] != "w2" {
		t.Fatalf("after b's release: holders %v; want w1 and w2", os)
	}
}

// The key's n goes with its last Limited holder, released or lapsed: a
// Limit(3) may then take a key a Limit(2) held, and an exclusive lock a
// key whose Limited holder lapsed.
func TestLimitForgottenWithLastHolder(t *testing.T) {
	d := testDriver(t)
	ctx := t.Context()
	key := "limit-" + rand.Text()
	a := grant(t, d, limited(key, "a", 2))
	mismatched(t, d, limited(key, "c", 3))
	if err := a.Hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c := grant(t, d, limited(key, "c", 3))
	if info, _ := owners(t, d, key); info.Mode != driver.Limited || info.Limit != 3 {
		t.Errorf("Status after a Limit(3) took the key: mode %v, Limit %d; want L, 3", info.Mode, info.Limit)
	}
	grant(t, d, lapsing(key, 3))
	if err := c.Hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitServerPast(t, d, 210*time.Millisecond)
	grant(t, d, limited(key, "d", 4)) // the lapsed holder evicted, its n with it
	if n, err := d.client.HGet(ctx, d.keys(driver.Plain, key)[0], "n").Result(); err != nil || n != "4" {
		t.Errorf("the key's n after a Limit(4) took it = %q, %v; want 4", n, err)
	}

	other := "limit-" + rand.Text()
	long := grant(t, d, limited(other, "long", 2)) // keeps the keys alive
	grant(t, d, lapsing(other, 2))
	if err := long.Hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
	x := &driver.Request{Key: other, Owner: "x", ID: rand.Text(), TTL: time.Second}
	mismatched(t, d, x)
	waitServerPast(t, d, 210*time.Millisecond)
	grant(t, d, x) // the exclusive script evicts it too
}

// A Limited hold that lapsed while another holder's TTL kept the keys
// alive was not held when released, even as the key's only hold.
func TestLimitLapsedHoldNotReleased(t *testing.T) {
	d := testDriver(t)
	ctx := t.Context()
	key := "limit-" + rand.Text()
	long := grant(t, d, limited(key, "long", 2))
	short := grant(t, d, lapsing(key, 2))
	if err := long.Hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitServerPast(t, d, 210*time.Millisecond)
	if err := short.Hold.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("release of a lapsed Limited hold: %v, want ErrNotHeld", err)
	}
	if _, err := d.Status(ctx, driver.Plain, key); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("Status after: %v, want the key free", err)
	}
}

// lapsing is a call of Limit n that lapses after 200 ms.
func lapsing(key string, n int) *driver.Request {
	r := limited(key, "lapsing", n)
	r.TTL = 200 * time.Millisecond
	return r
}

// Status reports a Limited key's mode, n and every holder (a re-entered
// one with its holds, in one slot); ForceUnlock drops them and wakes the
// n waiters at the head of the queue, not the next.
func TestLimitStatusAndForce(t *testing.T) {
	d := testDriver(t)
	ctx := t.Context()
	key := "limit-" + rand.Text()
	for _, o := range []string{"a", "b"} {
		grant(t, d, limited(key, o, 3))
	}
	grant(t, d, limited(key, "a", 3)) // re-entry: no second slot
	grant(t, d, limited(key, "c", 3))
	refused(t, d, limited(key, "e", 3))
	var wakes []<-chan struct{}
	for _, o := range []string{"w1", "w2", "w3", "w4"} {
		w := queued(key, o, 3)
		wakes = append(wakes, listen(t, d, w))
		refused(t, d, w)
	}
	info, os := owners(t, d, key)
	if info.Mode != driver.Limited || info.Limit != 3 || info.Waiters != 4 || len(os) != 3 ||
		os[0] != "a" || info.Holders[0].Holds != 2 || info.Owner != "a" || info.Holds != 2 {
		t.Fatalf("Status = %+v; want mode L, Limit 3, holders a (2 holds), b, c and 4 waiters", info)
	}
	if err := d.ForceUnlock(ctx, driver.Plain, key); err != nil {
		t.Fatal(err)
	}
	for i, wake := range wakes[:3] {
		woken(t, wake, []string{"w1", "w2", "w3"}[i])
	}
	notWoken(t, wakes[3], "w4")
}

// A release hands no slot to a waiter of another n, which a key emptied
// (ForceUnlock) let queue behind waiters of this one.
func TestLimitWaiterOfAnotherNNotHanded(t *testing.T) {
	d := testDriver(t)
	ctx := t.Context()
	key := "limit-" + rand.Text()
	grant(t, d, limited(key, "a", 2))
	grant(t, d, limited(key, "b", 2))
	w1, w2, w3, w4 := queued(key, "w1", 2), queued(key, "w2", 2), queued(key, "w3", 2), queued(key, "w4", 3)
	refused(t, d, w1)
	refused(t, d, w2)
	if err := d.ForceUnlock(ctx, driver.Plain, key); err != nil {
		t.Fatal(err)
	}
	refused(t, d, w3) // w1 and w2 wait before it
	refused(t, d, w4) // and w3
	grant(t, d, w1)
	g2 := grant(t, d, w2)
	d.Abandon(ctx, w3)
	if err := g2.Hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if info, os := owners(t, d, key); len(os) != 1 || os[0] != "w1" || info.Limit != 2 || info.Waiters != 1 {
		t.Fatalf("after w2's release: %v holding a Limit(%d), %d waiting; want w1 of a Limit(2), w4 waiting", os, info.Limit, info.Waiters)
	}
	mismatched(t, d, w4)
}

// Rule 2 holds whoever the owner: a Limited request meets shared or
// exclusive holders with ErrModeMismatch, and they it, through every path
// (the exclusive script included); nothing changes.
func TestLimitMismatchAnyOwner(t *testing.T) {
	d := testDriver(t)
	key := "limit-" + rand.Text()
	s := grant(t, d, &driver.Request{Key: key, Owner: "s", Mode: driver.Shared, ID: rand.Text(), TTL: 15 * time.Second})
	mismatched(t, d, limited(key, "l", 2))
	mismatched(t, d, queued(key, "l", 2))
	if err := s.Hold.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	x := grant(t, d, &driver.Request{Key: key, Owner: "x", ID: rand.Text(), TTL: 15 * time.Second})
	mismatched(t, d, limited(key, "l", 2))
	if err := x.Hold.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	grant(t, d, limited(key, "l", 2))
	for _, m := range []driver.Mode{driver.Exclusive, driver.Shared} {
		r := &driver.Request{Key: key, Owner: "o", Mode: m, ID: rand.Text(), TTL: 15 * time.Second, Queue: true, Wait: true}
		mismatched(t, d, r)
	}
	if info, os := owners(t, d, key); len(os) != 1 || os[0] != "l" || info.Waiters != 0 {
		t.Fatalf("after the mismatches: holders %v, %d waiting; want l alone", os, info.Waiters)
	}
}

// A batch of Limited requests (LockAll with Limit) is granted, refused or
// mismatched in one script, as one request would be; one of several
// Limits is declined.
func TestLimitBatch(t *testing.T) {
	d := testDriver(t)
	keys := []string{"limit-" + rand.Text(), "limit-" + rand.Text()}
	batch := func(owner string, n int) []*driver.Request {
		return []*driver.Request{limited(keys[0], owner, n), limited(keys[1], owner, n)}
	}
	for _, o := range []string{"a", "b"} {
		gs, err := d.AcquireBatch(t.Context(), batch(o, 2))
		if err != nil || gs[0].Hold == nil || gs[1].Hold == nil {
			t.Fatalf("batch of %s = %+v, %v; want both held", o, gs, err)
		}
	}
	if gs, err := d.AcquireBatch(t.Context(), batch("c", 2)); err != nil || gs[0].Hold != nil || gs[1].Hold != nil {
		t.Errorf("a third batch of Limit(2) = %+v, %v; want refused", gs, err)
	}
	if _, err := d.AcquireBatch(t.Context(), batch("c", 3)); !errors.Is(err, locker.ErrModeMismatch) {
		t.Errorf("a batch of Limit(3) = %v; want ErrModeMismatch", err)
	}
	mixed := []*driver.Request{limited(keys[0], "c", 2), limited(keys[1], "c", 3)}
	if _, err := d.AcquireBatch(t.Context(), mixed); !errors.Is(err, driver.ErrSkip) {
		t.Errorf("a batch of two Limits = %v; want ErrSkip", err)
	}
	for _, k := range keys {
		if info, os := owners(t, d, k); info.Limit != 2 || len(os) != 2 {
			t.Errorf("%s: Limit %d, holders %v; want 2, a and b", k, info.Limit, os)
		}
	}
}

// Through the Locker, on one server and on a cluster (shard channels): a
// release of a full Limit(2) hands the slot to the first Lock waiting,
// which holds without a command of its own, and not to the second.
func TestLimitHandOffThroughLocker(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		opt, err := goredis.ParseURL(testenv.URL(t, "LOCKER_TEST_REDIS").String())
		if err != nil {
			t.Fatal(err)
		}
		checkLimitHandOff(t, func(c *counter) goredis.UniversalClient {
			cl := goredis.NewClient(opt)
			if c != nil {
				cl.AddHook(c)
			}
			return cl
		})
	})
	t.Run("cluster", func(t *testing.T) {
		u := testenv.URL(t, "LOCKER_TEST_REDIS_CLUSTER")
		checkLimitHandOff(t, func(c *counter) goredis.UniversalClient {
			o := &goredis.ClusterOptions{Addrs: splitHosts(u.Host)}
			if c != nil {
				o.NewClient = func(o *goredis.Options) *goredis.Client {
					n := goredis.NewClient(o)
					n.AddHook(c)
					return n
				}
			}
			return goredis.NewClusterClient(o)
		})
	})
}

// checkLimitHandOff: two Lockers hold "k" with Limit(2) while two more
// (whose clients newClient(calls) makes) wait for it in turn; a release
// hands its slot to the first, fenced above, which holds it without a
// command; the second waits until the next release.
func checkLimitHandOff(t *testing.T, newClient func(*counter) goredis.UniversalClient) {
	ctx := t.Context()
	calls := &counter{}
	pfx := WithPrefix("locker-limit-test:" + rand.Text() + ":")
	lockers := make([]locker.Locker, 4)
	for i := range lockers {
		var c *counter
		if i >= 2 {
			c = calls
		}
		cl := newClient(c)
		t.Cleanup(func() { cl.Close() })
		l, err := New(cl, pfx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		lockers[i] = l
	}
	var held [2]locker.Lease
	for i := range held {
		var err error
		if held[i], err = lockers[i].TryLock(ctx, "k", locker.Limit(2)); err != nil {
			t.Fatal(err)
		}
	}
	var got [2]chan locker.Lease
	for i, l := range lockers[2:] {
		got[i] = make(chan locker.Lease, 1)
		go func() {
			lease, err := l.Lock(ctx, "k", locker.Limit(2))
			if err != nil {
				t.Error(err)
			}
			got[i] <- lease
		}()
		waitWaiters(t, lockers[0], i+1)
	}
	before := calls.Count()
	if err := held[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	first := leaseOf(t, got[0], "the first waiter")
	if first.Fence() <= max(held[0].Fence(), held[1].Fence()) {
		t.Errorf("handed fence %d not above the holders' %d, %d", first.Fence(), held[0].Fence(), held[1].Fence())
	}
	select {
	case <-got[1]:
		t.Fatal("the second waiter took a slot of a full Limit(2)")
	case <-time.After(200 * time.Millisecond):
	}
	if err := held[1].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	second := leaseOf(t, got[1], "the second waiter")
	if second.Fence() <= first.Fence() {
		t.Errorf("second handed fence %d not above %d", second.Fence(), first.Fence())
	}
	if n := calls.Count() - before; n != 0 {
		t.Errorf("the waiters sent %d commands to take the slots handed to them (the last: %v), want none", n, calls.Last())
	}
	for _, l := range []locker.Lease{first, second} {
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
}

// waitWaiters waits until n Lock calls wait for "k".
func waitWaiters(t *testing.T, l locker.Locker, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		info, err := l.(locker.Admin).Status(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == n {
			return
		}
	}
	t.Fatalf("%d waiters not queued", n)
}

// leaseOf takes a waiter's lease from ch.
func leaseOf(t *testing.T, ch <-chan locker.Lease, who string) locker.Lease {
	t.Helper()
	select {
	case l := <-ch:
		if l == nil {
			t.FailNow()
		}
		return l
	case <-time.After(5 * time.Second):
		t.Fatalf("%s got no lease", who)
	}
	return nil
}

// splitHosts are the hosts of a cluster URL's host list.
func splitHosts(hosts string) []string { return strings.Split(hosts, ",") }
