package redis

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// commandsRun is how many commands c's server has run, scripts' own
// included.
func commandsRun(t *testing.T, c *goredis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	return testenv.RedisCommands(info)
}

// The release that hands a key to an exclusive waiter, the hand-off's
// own path, runs on the server only what the hand-off needs: EVALSHA,
// HGET, DEL, EXISTS, TIME, ZRANGE, HMGET, INCR, HSET (the holder and its
// count in one), ZREM, HDEL, PUBLISH and PEXPIRE; no look for a reader's
// hold (HEXISTS) or for readers' expiries (EXISTS), none of them granted.
func TestHandoffReleaseCost(t *testing.T) {
	testenv.URL(t, "LOCKER_TEST_REDIS") // -short skips
	srv := testenv.StartRedis(t, 0)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	d := driverOn(t, client, "locker-cost-test:")
	ctx := context.Background()
	for round := range 2 { // the first round loads each script (EVAL)
		key := "k-" + rand.Text()
		holder := acquire(t, d, call(key, "holder"))
		r := &driver.Request{Key: key, Owner: "waiter", ID: "W" + rand.Text(), TTL: 15 * time.Second, Queue: true, Wait: true}
		if g, err := d.Acquire(ctx, r); err != nil || g.Hold != nil { // queued
			t.Fatalf("Acquire of a held key = %+v, %v; want a refusal", g, err)
		}
		before := commandsRun(t, client)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		ran := commandsRun(t, client) - before
		if owner, _ := client.HGet(ctx, d.keys(driver.Plain, key)[0], "h0:waiter").Result(); owner == "" {
			t.Fatalf("round %d: the release did not hand the key to the waiter", round)
		}
		if round == 1 && ran > 13 {
			t.Errorf("the server ran %d commands for a release handing the key on; want at most 13", ran)
		}
	}
}
