package etcd_test

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkHandoffUnderWrites measures the time from Unlock to the
// waiter's Lock returning while another client writes an unrelated key
// non-stop. Watching the predecessor from "the revision after my read"
// would, under such writes, nearly always start behind the server's
// revision and wait for etcd's unsynced-watcher pass (~100 ms); the
// adapter's watch starts at the current revision, so handoffs stay at
// about one write plus one read.
func BenchmarkHandoffUnderWrites(b *testing.B) {
	be := testBackend(b)
	noise := client(b, be.addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			_, _ = noise.Put(ctx, be.prefix+"handoff-noise", "x")
		}
	}()
	holder, waiter := newLockerB(b, be), newLockerB(b, be)
	h := harness(b, false)
	key := "handoff-under-writes/" + b.Name()
	var handoffs []time.Duration
	for b.Loop() {
		held, err := holder.Lock(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			lease, err := waiter.Lock(ctx, key)
			got <- time.Now()
			if err != nil {
				b.Error(err)
				return
			}
			_ = lease.Unlock(ctx)
		}()
		for count(b, h, key) != 2 { // the waiter has queued
			time.Sleep(100 * time.Microsecond)
		}
		released := time.Now()
		if err := held.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		handoffs = append(handoffs, (<-got).Sub(released))
	}
	slices.Sort(handoffs)
	b.ReportMetric(float64(handoffs[len(handoffs)/2].Microseconds())/1000, "p50-handoff-ms")
	b.ReportMetric(float64(handoffs[len(handoffs)*99/100].Microseconds())/1000, "p99-handoff-ms")
}
