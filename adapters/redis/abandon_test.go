package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// testDriver is a driver on the test Redis, closed when t ends.
func testDriver(t *testing.T) *redisDriver {
	t.Helper()
	opt, err := goredis.ParseURL(testenv.URL(t, "LOCKER_TEST_REDIS").String())
	if err != nil {
		t.Fatal(err)
	}
	return driverOn(t, goredis.NewClient(opt), "locker-abandon-test:")
}

// driverOn is a driver over client, with its keys under prefix; client
// and driver are closed when t ends.
func driverOn(t *testing.T, client *goredis.Client, prefix string) *redisDriver {
	d := &redisDriver{client: client, prefix: prefix}
	d.sub = newSubscriber(client, d.wakePrefix(), &d.Log)
	t.Cleanup(func() { d.Close(context.Background()); client.Close() })
	return d
}

// call is a re-entrant TryLock call of owner "me" on key.
func call(key, id string) *driver.Request {
	return &driver.Request{Key: key, Owner: "me", Reentrant: true, ID: id, TTL: 15 * time.Second}
}

// acquire runs the acquire script once for r and returns the hold it got.
func acquire(t *testing.T, d *redisDriver, r *driver.Request) driver.Hold {
	t.Helper()
	g, err := d.Acquire(context.Background(), r)
	if err != nil || g.Hold == nil {
		t.Fatalf("Acquire(%s) = %+v, %v; want a hold", r.ID, g, err)
	}
	return g.Hold
}

// A call whose acquire landed but whose reply was lost (its ctx ended, the
// connection dropped) must not leave a phantom holder: abandon takes the
// hold back, and only that one.
func TestAbandonTakesBackALostGrant(t *testing.T) {
	d := testDriver(t)
	ctx := context.Background()
	key := "k-" + rand.Text()

	// The grant lands; pretend its reply was lost, then abandon the call.
	acquire(t, d, call(key, "call1"))
	d.Abandon(ctx, call(key, "call1"))
	if _, err := d.Status(ctx, driver.Plain, key); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("after abandoning a lost grant, Status = %v; want the key free", err)
	}

	// A re-entry's lost grant drops only its own hold.
	first := acquire(t, d, call(key, "call2"))
	acquire(t, d, call(key, "call3"))
	d.Abandon(ctx, call(key, "call3"))
	info, err := d.Status(ctx, driver.Plain, key)
	if err != nil || info.Holds != 1 {
		t.Fatalf("after abandoning a lost re-entry: %+v, %v; want the first hold alone", info, err)
	}
	// Abandoning again, or a call that never held, changes nothing.
	d.Abandon(ctx, call(key, "call3"))
	d.Abandon(ctx, call(key, "other"))
	if info, err := d.Status(ctx, driver.Plain, key); err != nil || info.Holds != 1 {
		t.Fatalf("a repeated or foreign abandon changed the lock: %+v, %v", info, err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Status(ctx, driver.Plain, key); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Status after the last Unlock = %v", err)
	}
}

// A release retried after a lost reply drops its own hold once and never
// another hold of the same owner.
func TestReleaseRetriedDropsOnlyItsHold(t *testing.T) {
	d := testDriver(t)
	ctx := context.Background()
	key := "k-" + rand.Text()
	for _, id := range []string{"a", "b"} {
		acquire(t, d, call(key, id))
	}
	a := &hold{d: d, key: key, owner: "me", ttl: 15000, id: d.sub.token("a")}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("a second release of the same hold = %v, want ErrNotHeld", err)
	}
	if info, err := d.Status(ctx, driver.Plain, key); err != nil || info.Holds != 1 {
		t.Fatalf("after hold a was released twice: %+v, %v; want b's hold alone", info, err)
	}
	b := &hold{d: d, key: key, owner: "me", ttl: 15000, id: d.sub.token("b"), unsure: true}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx); err != nil { // its first reply was lost: done is done
		t.Errorf("a release retried after a lost reply = %v, want nil", err)
	}
	if _, err := d.Status(ctx, driver.Plain, key); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Status after both holds were released = %v", err)
	}
}
