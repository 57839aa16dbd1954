package redis

import (
	"context"
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// A waiter in the releasing process (here another Locker's) is handed its
// grant from the release's reply: it holds the key with no message from
// the server (its subscription is cut before the release) and no call of
// its own. The message, should it come after all, gives nothing more.
func TestReleaseHandsOverInProcess(t *testing.T) {
	holderD, waiterD := testDriver(t), testDriver(t)
	ctx := context.Background()
	key := "k-" + rand.Text()
	holder := acquire(t, holderD, call(key, "holder"))
	r := &driver.Request{Key: key, Owner: "waiter", ID: "W-" + rand.Text(), TTL: 15 * time.Second, Queue: true, Wait: true}
	wake, stop, err := waiterD.Subscribe(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if g, err := waiterD.Acquire(ctx, r); err != nil || g.Hold != nil {
		t.Fatalf("Acquire of a held key = %+v, %v; want a place", g, err)
	}
	waiterD.sub.mu.Lock()
	err = waiterD.sub.ps.Close() // no message reaches the waiter from now on
	waiterD.sub.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken by the release in its process")
	}
	token := waiterD.sub.waiter(r)
	waiterD.sub.handMu.Lock()
	fence := waiterD.sub.hands[token]
	waiterD.sub.handMu.Unlock()
	g, err := waiterD.Acquire(ctx, r)
	if err != nil || g.Hold == nil || g.Fence != fence || fence == 0 {
		t.Fatalf("the waiter's attempt = %+v, %v; want the grant handed over (fence %d)", g, err, fence)
	}
	waiterD.sub.note("g " + token + " " + strconv.FormatUint(fence, 10)) // the message, late
	if f, ok := waiterD.sub.handed(token); ok {
		t.Fatalf("the grant of fence %d, heard again, was given again (%d)", fence, f)
	}
	if err := g.Hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A grant comes twice to a waiter of the releasing process, the reply's
// and the message's, in either order: each is given once, a later grant
// (the call gave the first back dead and was granted anew) is given, an
// earlier one heard late is not, and nothing is given to a call that
// stopped waiting.
func TestGrantsHeardTwiceAreGivenOnce(t *testing.T) {
	opt, err := goredis.ParseURL(testenv.URL(t, "LOCKER_TEST_REDIS").String())
	if err != nil {
		t.Fatal(err)
	}
	d := driverOn(t, goredis.NewClient(opt), "locker-handover-test:")
	r := &driver.Request{Key: "k-" + rand.Text(), ID: "X", Queue: true}
	token := d.sub.waiter(r)
	_, stop, err := d.Subscribe(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	heard := func(fence uint64, want bool) {
		t.Helper()
		if got := d.sub.heard(token, fence); got != want {
			t.Fatalf("heard fence %d: gave %v, want %v", fence, got, want)
		}
	}
	heard(5, true)
	heard(5, false) // the other copy
	if f, ok := d.sub.handed(token); !ok || f != 5 {
		t.Fatalf("took %d (%v), want 5", f, ok)
	}
	heard(5, false) // the other copy, after the grant was taken
	heard(9, true)  // granted anew
	heard(7, false) // an earlier grant's copy, late
	stop()
	heard(11, false) // the call stopped waiting
	if _, ok := d.sub.handed(token); ok {
		t.Fatal("a grant kept for a call that stopped waiting")
	}
}
