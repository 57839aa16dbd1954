package redsync

import (
	"context"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// publishAll publishes payload on key's channel on every master, in turn,
// each returning only after its master has delivered it.
func publishAll(t *testing.T, l *testLocker, clients []goredis.UniversalClient, key, payload string) {
	t.Helper()
	for i, c := range clients {
		if err := c.Publish(context.Background(), l.channel(key), payload).Err(); err != nil {
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
	wake, leave, err := l.hub.Subscribe(ctx, key)
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
		id, err := clients[0].HGet(ctx, l.lockKey(key), "a").Result()
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
	publishAll(t, l, clients, key, takePayload(first.id, 30*time.Second, first.fence))
	sentinel()
	if ttl, held := l.news.takenSince(key, before); held {
		t.Fatalf("a take heard after its hold's release makes the free key look held for %v", ttl)
	}

	current, release := take()
	before = time.Now()
	publishAll(t, l, clients, key, takePayload(current.id, 30*time.Second, current.fence))
	sentinel()
	if _, held := l.news.takenSince(key, before); !held {
		t.Fatal("the take of a live hold was not heard")
	}
	release()
	if _, held := l.news.takenSince(key, before); held {
		t.Fatal("a released hold's take still makes the key look held")
	}
}
