package redis

import (
	"context"
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

// On a slotted cluster a release tells its waiter's Locker alone: the
// grant goes on that Locker's channel of the lock, not on one that every
// Locker with a waiter of the lock listens on (and, for the Lockers of
// earlier versions, on the lock's own channel).
func TestGrantReachesTheWaitersLockerAlone(t *testing.T) {
	cc := dialCluster(t)
	d := &redisDriver{client: cc, prefix: "locker-shards-test:"}
	d.sub = newSubscriber(cc, d.wakePrefix(), &d.Log)
	if !d.slotted() {
		t.Fatal("the test cluster's driver is not slotted")
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	ctx := t.Context()
	key := "k-" + rand.Text()
	holder := acquire(t, d, call(key, "holder"))
	r := &driver.Request{Key: key, Owner: "waiter", ID: "W" + rand.Text(), TTL: 15 * time.Second, Queue: true, Wait: true}
	if g, err := d.Acquire(ctx, r); err != nil || g.Hold != nil {
		t.Fatalf("Acquire of a held key = %+v, %v; want a refusal", g, err)
	}
	own, other := d.ownShardChannel(driver.Plain, key), d.shardChannel(driver.Plain, key)+":another"
	ps := cc.SSubscribe(ctx, own, other) // one slot: one connection, messages in the order sent
	t.Cleanup(func() { ps.Close() })
	for range 2 {
		if _, err := ps.Receive(ctx); err != nil { // the confirmations
			t.Fatal(err)
		}
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cc.SPublish(ctx, other, "sentinel").Err(); err != nil {
		t.Fatal(err)
	}
	m, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := "g " + d.sub.waiter(r) + " "; m.Channel != own || !strings.HasPrefix(m.Payload, want) {
		t.Fatalf("first message %q on %s; want the grant %q… on the waiter's Locker's channel %s", m.Payload, m.Channel, want, own)
	}
	if m, err := ps.ReceiveMessage(ctx); err != nil || m.Channel != other || m.Payload != "sentinel" {
		t.Fatalf("next message %+v, %v; want only the sentinel on another Locker's channel", m, err)
	}
}
