package redis

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/locker-go/locker/driver"
)

// Waiters queue in arrival order even when they arrive within one
// millisecond of the server's clock: Redis orders equal scores by name,
// and a newcomer sorted before an earlier waiter would keep it out while
// nobody woke the newcomer (both then slept until their fallback timer).
func TestQueueKeepsArrivalOrderWithinAMillisecond(t *testing.T) {
	d := testDriver(t)
	ctx := context.Background()
	key := "k-" + rand.Text()
	holder := acquire(t, d, call(key, "holder"))
	var want []string
	for i := 50; i > 0; i-- { // names sort the other way round
		r := &driver.Request{Key: key, Owner: fmt.Sprintf("w%02d", i), ID: fmt.Sprintf("W%02d", i), TTL: 15 * time.Second, Queue: true, Wait: true}
		if g, err := d.Acquire(ctx, r); err != nil || g.Hold != nil {
			t.Fatalf("Acquire of a held key = %+v, %v; want a refusal", g, err)
		}
		want = append(want, d.sub.waiter(r))
	}
	got, err := d.client.ZRange(ctx, d.keys(driver.Plain, key)[2], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("queue order = %v\nwant arrival order %v", got, want)
	}
	_ = holder.Release(ctx)
}
