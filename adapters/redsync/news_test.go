package redsync

import (
	"context"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/driver"
)

// publishAll publishes payload on key's channel on every master, in turn,
// each returning only after its master has delivered it.
func publishAll(t *testing.T, l *testLocker, clients []goredis.UniversalClient, key, payload string) {
	t.Helper()
	for i, c := range clients {
		if err := c.Publish(context.Background(), l.channel(name{driver.Plain, key}), payload).Err(); err != nil {
			t.Fatalf("PUBLISH on master %d: %v", i, err)
		}
	}
}

// A take announced after its own release, and after more releases pushed
// that one out of the recent ones, must not make waiters believe the key
// is held (review item 9); a current take still must.
func TestLateTakeIsIgnored(t *testing.T) {
	l, clients := plainLocker(t)
	holder, _ := plainLocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := uniqueKey(t, "k")
	hk := hubKey(name{driver.Plain, key}, driver.Exclusive)
	wake, leave, err := l.hub.Subscribe(ctx, hk)
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	woken := func(what string) {
		t.Helper()
		select {
		case <-wake:
		case <-ctx.Done():
			t.Fatalf("%s: no release heard", what)
		}
	}
	// sentinel publishes a release nobody held after everything sent
	// before it, and waits until it is heard: so is all that went before.
	sentinels := 0
	sentinel := func() {
		t.Helper()
		sentinels++
		publishAll(t, l, clients, key, "sentinel-"+strconv.Itoa(sentinels))
		woken("sentinel")
	}

	type hold struct {
		id    string
		fence uint64
	}
	take := func() (hold, func()) {
		t.Helper()
		ls, err := holder.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		id, err := clients[0].HGet(ctx, l.anchor(name{driver.Plain, key}), "a0"+ls.Owner()).Result()
		if err != nil {
			t.Fatal(err)
		}
		return hold{id, ls.Fence()}, func() {
			if err := ls.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			woken("release")
		}
	}

	first, release := take()
	release()
	for range 5 { // more releases than a Locker remembers ids of
		_, release := take()
		release()
	}
	before := time.Now()
	publishAll(t, l, clients, key, takePayload(first.id, 30*time.Second, first.fence, driver.Exclusive))
	sentinel()
	if ttl, held := l.news.takenSince(hk, driver.Exclusive, before); held {
		t.Fatalf("a take heard after its hold's release makes the free key look held for %v", ttl)
	}

	current, release := take()
	before = time.Now()
	publishAll(t, l, clients, key, takePayload(current.id, 30*time.Second, current.fence, driver.Exclusive))
	sentinel()
	if _, held := l.news.takenSince(hk, driver.Exclusive, before); !held {
		t.Fatal("the take of a live hold was not heard")
	}
	release()
	if _, held := l.news.takenSince(hk, driver.Exclusive, before); held {
		t.Fatal("a released hold's take still makes the key look held")
	}
}

// A release wakes the waiters once, at the quorum-th copy (or when settled
// without it); it names the first waiter, and only a waiter after it whose
// mode it excludes stays put; copies that disagree name the later one, or
// none. A take keeps out only the modes it excludes.
func TestNewsOfReleases(t *testing.T) {
	n := &news{need: 3, keys: map[string]*keyNews{}}
	n.watch("k")
	for i, want := range []bool{false, false, true, false} {
		wake, first := n.heard("k", "a1 5 100 0 callA")
		if wake != want || (first != "") != (i == 0) {
			t.Fatalf("copy %d of a release: wake %v, first %q; want wake %v", i+1, wake, first, want)
		}
	}
	for _, c := range []struct {
		mode  driver.Mode
		stamp int64
		call  string
		want  bool
	}{
		{driver.Exclusive, 200, "callB", true},
		{driver.Shared, 200, "callB", true},
		{driver.IntentShared, 200, "callB", true},
		{driver.Exclusive, 50, "callZ", false},
		{driver.Exclusive, 100, "callA", false},
		{driver.Exclusive, 100, "callB", true},
	} {
		if got := n.behind("k", c.mode, c.stamp, c.call); got != c.want {
			t.Errorf("behind an X waiter (100, callA): %v waiter (%d, %s) = %v, want %v", c.mode, c.stamp, c.call, got, c.want)
		}
	}
	n.heard("k", "a1 5 300 0 callC")
	if n.behind("k", driver.Exclusive, 200, "callB") {
		t.Error("a copy naming a later first waiter: a waiter before it still stays put")
	}
	n.heard("k", "a1 5")
	if n.behind("k", driver.Exclusive, 400, "callD") {
		t.Error("a copy naming no waiter: a waiter still stays put")
	}

	if wake, _ := n.heard("k", " 0 100 1 callS"); !wake {
		t.Error("a mark's removal did not wake the waiters")
	}
	if n.behind("k", driver.Shared, 200, "callB") || !n.behind("k", driver.Exclusive, 200, "callB") {
		t.Error("behind a shared first waiter: a later reader must look again, a later writer stay put")
	}

	if wake, first := n.heard("k", "r2 6"); wake || first != "r2" {
		t.Fatalf("first copy of release r2: wake %v, first %q", wake, first)
	}
	if !n.settle("k", "r2") || n.settle("k", "r2") {
		t.Error("settle must wake for a release once")
	}
	for range 3 {
		if wake, _ := n.heard("k", "r2 6"); wake {
			t.Error("a settled release woke the waiters again at its quorum")
		}
	}

	before := time.Now()
	n.heard("k", takePayload("T1", time.Second, 9, driver.Shared))
	if _, held := n.takenSince("k", driver.Shared, before); held {
		t.Error("a shared take keeps readers out")
	}
	if _, held := n.takenSince("k", driver.Exclusive, before); !held {
		t.Error("a shared take does not keep a writer out")
	}
}
