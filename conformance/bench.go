package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/workload"
)

// Bench runs the standard benchmarks against the backend h drives:
//
//   - Uncontended: one client locks and unlocks a key; with h.RoundTrip it
//     also reports the cost as a multiple of one plain round trip (rtt-x).
//   - Contended: 8 clients contend on one key, each holding it 1 ms; it
//     reports ops/s and the p50/p99 wait for the lock, in ms.
func Bench(b *testing.B, h Harness) {
	b.Run("Uncontended", func(b *testing.B) { benchUncontended(b, h) })
	b.Run("Contended", func(b *testing.B) { benchContended(b, h, 8, time.Millisecond) })
}

func benchUncontended(b *testing.B, h Harness) {
	l := benchClient(b, h)
	key := benchKey(b, h)
	ctx := context.Background()
	// Round trips are timed between the lock+unlock pairs, not before them,
	// so that load on a shared machine weighs on both alike.
	var locking, rtt time.Duration
	for b.Loop() {
		t0 := time.Now()
		lease, err := l.Lock(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		locking += time.Since(t0)
		if h.RoundTrip != nil {
			b.StopTimer()
			t1 := time.Now()
			if err := h.RoundTrip(ctx); err != nil {
				b.Fatal(err)
			}
			rtt += time.Since(t1)
			b.StartTimer()
		}
	}
	if rtt > 0 {
		b.ReportMetric(float64(locking)/float64(rtt), "rtt-x")
		b.ReportMetric(float64(rtt.Microseconds())/float64(b.N), "rtt-µs")
	}
}

// benchClient makes a Locker and closes it when the benchmark ends.
func benchClient(b *testing.B, h Harness) locker.Locker {
	b.Helper()
	l, err := h.NewLocker(context.Background())
	if err != nil {
		b.Fatalf("NewLocker: %v", err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// benchKey is a key unique to this benchmark and run.
func benchKey(b *testing.B, h Harness) string {
	return h.prefix() + b.Name() + "/k"
}

// Contention is what one contended run measured: ops, elapsed time, the
// sorted waits and the acquisitions per client, with OpsPerSec, Wait(q)
// and Fairness.
type Contention = workload.Contention

// Contend has each of lockers (each its own client) take key in turn, ops
// times in all, holding it for hold each time: the workload of Bench's
// Contended, for use outside go test.
func Contend(ctx context.Context, lockers []locker.Locker, key string, ops int, hold time.Duration) (Contention, error) {
	return workload.Contend(ctx, lockers, key, ops, hold, nil)
}

func benchContended(b *testing.B, h Harness, workers int, hold time.Duration) {
	lockers := make([]locker.Locker, workers)
	for i := range lockers {
		lockers[i] = benchClient(b, h)
	}
	key := benchKey(b, h)
	b.ResetTimer()
	res, err := Contend(context.Background(), lockers, key, b.N, hold)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.OpsPerSec(), "ops/s")
	b.ReportMetric(float64(res.Wait(0.50).Microseconds())/1000, "p50-wait-ms")
	b.ReportMetric(float64(res.Wait(0.99).Microseconds())/1000, "p99-wait-ms")
	b.ReportMetric(res.Fairness(), "fairness")
}
