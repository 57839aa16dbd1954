package redis

import (
	"crypto/rand"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// A lock's shard subscription outlives its last waiter by the linger, so
// that a lock waited for again and again keeps one subscription (one
// connection to its master): a waiter that comes within the linger takes
// the same one, which ends once the linger passes with nobody on it.
func TestShardSubscriptionLingers(t *testing.T) {
	x, ch := testShards(t)
	ctx := t.Context()
	if x.live(ch) {
		t.Fatal("a channel nobody joined is live")
	}
	first, err := x.join(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	x.leave(ch, first, true)
	if !x.live(ch) {
		t.Fatal("the subscription is not live within its linger (a Lock would subscribe, a round trip, before its first attempt)")
	}
	again, err := x.join(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Fatal("a waiter within the linger subscribed anew")
	}
	x.mu.Lock()
	x.linger = time.Millisecond
	x.mu.Unlock()
	x.leave(ch, again, true)
	testenv.Signalled(t, first.done, "the subscription's end after the linger")
	x.mu.Lock()
	_, kept := x.subs[ch]
	x.mu.Unlock()
	if kept || x.live(ch) {
		t.Fatal("the ended subscription is still the channel's")
	}
	next, err := x.join(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	if next == first {
		t.Fatal("a waiter after the linger got the ended subscription")
	}
	x.leave(ch, next, true)
}

// testShards is a Locker's shard subscriptions on the test cluster, with
// an hour's linger, closed when t ends, and a shard channel of its own.
func testShards(t *testing.T) (*shards, string) {
	cc := dialCluster(t)
	x := &shards{cc: cc, sub: newSubscriber(cc, "locker-shards-test:", &driver.Log{}), subs: map[string]*shardSub{}, linger: time.Hour}
	t.Cleanup(x.close)
	return x, "locker-shards-test:w:{" + rand.Text() + "}"
}

// dialCluster is a client of the test cluster, closed when t ends.
func dialCluster(t *testing.T) *goredis.ClusterClient {
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs: strings.Split(testenv.URL(t, "LOCKER_TEST_REDIS_CLUSTER").Host, ","), DialTimeout: time.Second,
	})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// A call that leaves the subscription without having waited (it joined
// because the subscription was up, and took the key at its first
// attempt) does not lengthen the linger: only a call that waited does.
func TestShardLingerRunsFromTheLastWait(t *testing.T) {
	x, ch := testShards(t)
	ctx := t.Context()
	s, err := x.join(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	x.leave(ch, s, true)
	until := func() time.Time {
		x.mu.Lock()
		defer x.mu.Unlock()
		return s.until
	}
	waitedUntil := until()
	x.mu.Lock()
	x.linger = time.Millisecond // a later wait ends it at once
	x.mu.Unlock()
	if again, err := x.join(ctx, ch); err != nil || again != s {
		t.Fatalf("join within the linger = %v, %v; want the same subscription", again == s, err)
	}
	x.leave(ch, s, false)
	if got := until(); !got.Equal(waitedUntil) || !x.live(ch) {
		t.Fatalf("a call that did not wait moved the end from %v to %v (live: %v)", waitedUntil, got, x.live(ch))
	}
	if again, err := x.join(ctx, ch); err != nil || again != s {
		t.Fatalf("join within the linger = %v, %v; want the same subscription", again == s, err)
	}
	x.leave(ch, s, true)
	testenv.Signalled(t, s.done, "the subscription's end a linger after the last wait")
}
