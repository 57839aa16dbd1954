package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// testLocker is a Locker on the test Redis, closed when t ends.
func testLocker(t *testing.T) *Locker {
	t.Helper()
	opt, err := goredis.ParseURL(testenv.URL(t, "LOCKER_TEST_REDIS").String())
	if err != nil {
		t.Fatal(err)
	}
	client := goredis.NewClient(opt)
	l, err := New(client, WithPrefix("locker-abandon-test:"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); client.Close() })
	return l.(*Locker)
}

// A call whose acquire landed but whose reply was lost (its ctx ended, the
// connection dropped) must not leave a phantom holder: abandon takes the
// hold back, and only that one.
func TestAbandonTakesBackALostGrant(t *testing.T) {
	l := testLocker(t)
	ctx := context.Background()
	key := "k-" + rand.Text()
	o, _ := locker.Resolve(key, locker.WithOwner("me"))

	// The grant lands; pretend its reply was lost, then abandon the call.
	if _, _, err := l.attempt(ctx, key, "call1", false, o); err != nil {
		t.Fatal(err)
	}
	l.abandon(ctx, key, "call1")
	if _, err := l.Status(ctx, key); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("after abandoning a lost grant, Status = %v; want the key free", err)
	}

	// A re-entry's lost grant drops only its own hold.
	first, _, err := l.attempt(ctx, key, "call2", false, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.attempt(ctx, key, "call3", false, o); err != nil {
		t.Fatal(err)
	}
	l.abandon(ctx, key, "call3")
	info, err := l.Status(ctx, key)
	if err != nil || info.Holds != 1 {
		t.Fatalf("after abandoning a lost re-entry: %+v, %v; want the first hold alone", info, err)
	}
	// Abandoning again, or a call that never held, changes nothing.
	l.abandon(ctx, key, "call3")
	l.abandon(ctx, key, "other")
	if info, err := l.Status(ctx, key); err != nil || info.Holds != 1 {
		t.Fatalf("a repeated or foreign abandon changed the lock: %+v, %v", info, err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Status(ctx, key); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Status after the last Unlock = %v", err)
	}
}

// A release retried after a lost reply drops its own hold once and never
// another hold of the same owner.
func TestReleaseRetriedDropsOnlyItsHold(t *testing.T) {
	l := testLocker(t)
	ctx := context.Background()
	key := "k-" + rand.Text()
	o, _ := locker.Resolve(key, locker.WithOwner("me"))
	for _, call := range []string{"a", "b"} {
		if _, _, err := l.attempt(ctx, key, call, false, o); err != nil {
			t.Fatal(err)
		}
	}
	a := &hold{l: l, key: key, owner: "me", ttl: 15000, id: "a"}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("a second release of the same hold = %v, want ErrNotHeld", err)
	}
	if info, err := l.Status(ctx, key); err != nil || info.Holds != 1 {
		t.Fatalf("after hold a was released twice: %+v, %v; want b's hold alone", info, err)
	}
	b := &hold{l: l, key: key, owner: "me", ttl: 15000, id: "b", unsure: true}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx); err != nil { // its first reply was lost: done is done
		t.Errorf("a release retried after a lost reply = %v, want nil", err)
	}
	if _, err := l.Status(ctx, key); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Status after both holds were released = %v", err)
	}
}
