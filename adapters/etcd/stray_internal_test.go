package etcd

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker/driver"
)

// An entry whose creating txn got no answer, and that Abandon found
// missing, may land after all (etcd applies a txn its client gave up on):
// the sweep looks for it and drops it, where it would sit on the Locker's
// kept-alive lease ahead of every later waiter.
func TestStrayEntryLandingAfterAbandonIsSwept(t *testing.T) {
	t.Parallel()
	_, d, c := testLocker(t)
	ctx := context.Background()
	// The lease outlives the test: only the sweep may delete the entry.
	r := &driver.Request{Key: "stray-" + t.Name(), Owner: "o", ID: "id", Mode: driver.Exclusive, TTL: 60 * time.Second, KeepAlive: true, Wait: true}
	el, err := d.leaseFor(ctx, r.TTL, r.KeepAlive)
	if err != nil {
		t.Fatal(err)
	}
	en := &entry{d: d, r: r, name: d.names.take(d.queue(r.Space, r.Key)), lease: el, mayLand: true}
	r.State = en
	d.Abandon(ctx, r) // the queueing txn has not landed yet: nothing to drop
	if d.sweep(ctx) {
		t.Fatal("a sweep before the entry landed is done with it; want it looked for again")
	}

	landed, err := c.Put(ctx, en.name, en.record().encode(), clientv3.WithLease(el.id)) // now it has
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for resp := range c.Watch(wctx, en.name, clientv3.WithRev(landed.Header.Revision+1)) {
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return
			}
		}
	}
	t.Fatal("the entry that landed after Abandon is still there 10s later")
}
