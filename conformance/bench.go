package conformance

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/locker-go/locker"
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
	l := h.client(b)
	key := keyFor(b) + "k"
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

// Contention is what one contended run measured.
type Contention struct {
	Ops      int
	Elapsed  time.Duration
	Waits    []time.Duration // per acquisition, sorted
	PerOwner []int           // acquisitions per client
}

// OpsPerSec is the handoff throughput.
func (c Contention) OpsPerSec() float64 { return float64(c.Ops) / c.Elapsed.Seconds() }

// Wait returns the q-quantile (0..1) of the waits.
func (c Contention) Wait(q float64) time.Duration {
	if len(c.Waits) == 0 {
		return 0
	}
	return c.Waits[min(len(c.Waits)-1, int(q*float64(len(c.Waits))))]
}

// Contend has workers, each with its own Locker from newLocker, take key
// in turn ops times in all, holding it for hold each time.
func Contend(ctx context.Context, lockers []locker.Locker, key string, ops int, hold time.Duration) (Contention, error) {
	var (
		mu    sync.Mutex
		res   = Contention{PerOwner: make([]int, len(lockers))}
		next  int
		wg    sync.WaitGroup
		first error
	)
	take := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if next >= ops || first != nil {
			return false
		}
		next++
		return true
	}
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
	}
	start := time.Now()
	for i, l := range lockers {
		wg.Go(func() {
			for take() {
				t0 := time.Now()
				lease, err := l.Lock(ctx, key)
				if err != nil {
					fail(err)
					return
				}
				waited := time.Since(t0)
				time.Sleep(hold)
				if err := lease.Unlock(ctx); err != nil {
					fail(fmt.Errorf("unlock: %w", err))
					return
				}
				mu.Lock()
				res.Waits = append(res.Waits, waited)
				res.PerOwner[i]++
				res.Ops++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	slices.Sort(res.Waits)
	return res, first
}

func benchContended(b *testing.B, h Harness, workers int, hold time.Duration) {
	lockers := make([]locker.Locker, workers)
	for i := range lockers {
		lockers[i] = h.client(b)
	}
	key := keyFor(b) + "k"
	b.ResetTimer()
	res, err := Contend(context.Background(), lockers, key, b.N, hold)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.OpsPerSec(), "ops/s")
	b.ReportMetric(float64(res.Wait(0.50).Microseconds())/1000, "p50-wait-ms")
	b.ReportMetric(float64(res.Wait(0.99).Microseconds())/1000, "p99-wait-ms")
}
