package redsync

import (
	"context"
	"testing"
	"time"

	"github.com/locker-go/locker/driver"
)

// A waiter that leaves must not take a later waiter's subscription with it
// (review item 8). The masters' subscriptions are kept until Close, so no
// unsubscribe can arrive late: after a waiter left and another came, a
// release published on master 0 alone reaches a subscriber and is heard.
func TestLeavingKeepsTheSubscription(t *testing.T) {
	l, clients := plainLocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := uniqueKey(t, "k")
	n := name{driver.Plain, key}
	_, leave, err := l.hub.Subscribe(ctx, hubKey(n, driver.Exclusive))
	if err != nil {
		t.Fatal(err)
	}
	leave() // the last waiter leaves
	wake, leave, err := l.hub.Subscribe(ctx, hubKey(n, driver.Exclusive))
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	// Subscribe returns once a quorum of the masters' subscriptions is
	// live: master 0's may come a moment later, but it must come.
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n, err := clients[0].Publish(ctx, l.channel(n), "probe").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("master 0 has no subscriber to the key's channel 5s after a waiter left and another came")
		}
	}
	select {
	case <-wake:
	case <-time.After(2 * time.Second):
		t.Fatal("a release published on master 0 was not heard")
	}
}
