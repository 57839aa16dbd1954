package redsync

import (
	"context"
	"sync"
	"testing"
	"time"
)

// An unsubscribe that reaches a master late must not drop the
// subscription a later waiter made there (review item 8): the late
// unsubscribe is modelled by holding master 0's call back until the next
// subscription has been confirmed by a quorum.
func TestLateUnsubscribeKeepsNewSubscription(t *testing.T) {
	l, clients := plainLocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := uniqueKey(t, "k")
	channel := l.channel(key)

	var (
		mu       sync.Mutex
		once     sync.Once
		held     = make(chan struct{}) // closed to let the unsubscribe go
		unsubbed = make(chan struct{}) // closed once master 0's unsubscribe went
		subs     = 0                   // subscribe calls on master 0
		resub    = make(chan struct{}) // closed at the second
	)
	hook := func(master int, op, ch string) {
		if master != 0 || ch != channel {
			return
		}
		switch op {
		case "unsubscribe":
			<-held
			defer once.Do(func() { close(unsubbed) })
		case "subscribe":
			mu.Lock()
			if subs++; subs == 2 {
				close(resub)
			}
			mu.Unlock()
		}
	}
	for _, m := range l.masters {
		m.beforeOp = hook
	}

	_, leave, err := l.hub.Subscribe(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	leave() // the last waiter leaves: unsubscribe, held back on master 0
	wake, leave, err := l.hub.Subscribe(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	close(held)
	for _, c := range []chan struct{}{unsubbed, resub} {
		select {
		case <-c:
		case <-ctx.Done():
			t.Fatal("master 0's (un)subscribe calls did not run")
		}
	}
	// Let master 0 take in what was just written, then ask it.
	within(t, 5*time.Second, "master 0 settles", func() bool {
		return clients[0].Ping(ctx).Err() == nil
	})
	n, err := clients[0].PubSubNumSub(ctx, channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n[channel] != 1 {
		t.Fatalf("master 0 has %d subscriptions to the key's channel after the late unsubscribe, want 1", n[channel])
	}
	if err := clients[0].Publish(ctx, channel, "probe").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(2 * time.Second):
		t.Fatal("a release published on master 0 was not heard")
	}
}
