package redis

import (
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// A batch release lets a key go at once where its hold is the only one
// and nobody waits, and answers as the general path would: a lapsed
// shared hold whose key lives on (by an earlier holder's longer TTL) was
// not held; an ancestor another lease passes through keeps its hold.
func TestReleaseBatchAlone(t *testing.T) {
	d := testDriver(t)
	ctx := t.Context()
	root := "r" + rand.Text()
	req := func(owner, key string, m driver.Mode, ttl time.Duration) *driver.Request {
		return &driver.Request{Space: driver.Subtree, Key: key, Owner: owner, ID: rand.Text(), Mode: m, TTL: ttl}
	}
	take := func(rs ...*driver.Request) []driver.Hold {
		t.Helper()
		gs, err := d.AcquireBatch(ctx, rs)
		if err != nil {
			t.Fatal(err)
		}
		hs := make([]driver.Hold, len(gs))
		for i, g := range gs {
			if hs[i] = g.Hold; hs[i] == nil {
				t.Fatalf("%s not granted (retry %v)", rs[i].Key, g.Retry)
			}
		}
		return hs
	}
	release := func(want []error, hs ...driver.Hold) {
		t.Helper()
		errs, err := d.ReleaseBatch(ctx, hs)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if !errors.Is(errs[i], want[i]) || (want[i] == nil) != (errs[i] == nil) {
				t.Fatalf("release %d: %v, want %v", i, errs[i], want[i])
			}
		}
	}
	free := func(key string) bool { // an exclusive TryLock of key by another gets it
		t.Helper()
		g, err := d.Acquire(ctx, req("other", key, driver.Exclusive, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if g.Hold != nil {
			if err := g.Hold.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return g.Hold != nil
	}

	// Two exclusive subtree leases under root: the first's release drops
	// its own node and leaves root to the second.
	a := take(req("a", root, driver.IntentExclusive, time.Minute), req("a", root+"/a", driver.Exclusive, time.Minute))
	b := take(req("b", root, driver.IntentExclusive, time.Minute), req("b", root+"/b", driver.Exclusive, time.Minute))
	release([]error{nil, nil}, a[1], a[0])
	if !free(root+"/a") || free(root) {
		t.Fatalf("after a's release: %s or %s not as left: want free, held by b", root+"/a", root)
	}
	release([]error{nil, nil}, b[1], b[0])
	if !free(root) || !free(root+"/b") {
		t.Fatal("after b's release, its keys are still there")
	}

	// A shared lease alone on keys that a longer one kept alive, released
	// after it lapsed: not held, and nothing is left.
	long := take(req("c", root, driver.IntentShared, time.Minute), req("c", root+"/s", driver.Shared, time.Minute))
	short := take(req("s", root, driver.IntentShared, 300*time.Millisecond), req("s", root+"/s", driver.Shared, 300*time.Millisecond))
	release([]error{nil, nil}, long[1], long[0])
	waitServerPast(t, d, 310*time.Millisecond)
	release([]error{locker.ErrNotHeld, nil}, short[1], short[0])
	if !free(root) || !free(root+"/s") {
		t.Fatal("after the lapsed lease's release, its keys are still there")
	}
}

// A single release takes the same short way, and answers as the general
// path would: a shared hold that lapsed while an earlier holder's TTL kept
// the key alive was not held.
func TestReleaseAloneLapsed(t *testing.T) {
	d := testDriver(t)
	ctx := t.Context()
	key := "s" + rand.Text()
	take := func(owner string, ttl time.Duration) driver.Hold {
		t.Helper()
		g, err := d.Acquire(ctx, &driver.Request{Key: key, Owner: owner, ID: rand.Text(), Mode: driver.Shared, TTL: ttl})
		if err != nil || g.Hold == nil {
			t.Fatalf("%s: %+v, %v; want a hold", owner, g, err)
		}
		return g.Hold
	}
	long, short := take("long", time.Minute), take("short", 300*time.Millisecond)
	if err := long.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitServerPast(t, d, 310*time.Millisecond)
	if err := short.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("release of a lapsed shared hold: %v, want ErrNotHeld", err)
	}
	if _, err := d.Status(ctx, driver.Plain, key); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Status after: %v, want the key free", err)
	}
}

// waitServerPast waits until the server's clock has moved on by at least d.
func waitServerPast(t *testing.T, rd *redisDriver, d time.Duration) {
	t.Helper()
	since, err := rd.client.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		now, err := rd.client.Time(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if now.Sub(since) > d {
			return
		}
	}
}
