package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker"
)

// Bench runs the standard benchmarks against the backend h drives:
//
//   - Uncontended: one client locks and unlocks a key; with h.RoundTrip it
//     also reports the cost as a multiple of one plain round trip (rtt-x).
//     Its Shared, Subtree1 and Subtree5 variants lock a key in shared mode,
//     and a subtree path of depth 1 and 5; LockAll10 takes 10 keys with one
//     LockAll and Lock10 with 10 Locks, and both unlock them.
//   - Contended: 8 clients contend on one key, each holding it 1 ms (its
//     thread blocked that long, as in a blocking call: see HoldFor); it
//     reports ops/s, the p50/p99 wait for the lock, in ms, the mean number
//     of holders while any held the key and the share of the run when none
//     did (the hand-offs' cost), the median hold (a grant to its Unlock
//     call: the 1 ms as slept beside the lock's own work) and hand-off (a
//     hold's end to the next grant), whose sum is a hand-off's period, the
//     longest hand-off (handoff-max-ms: a wake missed shows here, as the
//     key lies free until a fallback timer), and with
//     h.RoundTrip the ceiling: 1 / (the hold as this machine sleeps it + one
//     round trip), the most a hand-off in a single message could give, and
//     ops/s as a percentage of it. ReadMix is the same with nine
//     acquisitions in ten shared; Readers with every one shared, the most
//     any read mix on one key can give on this machine (no writer waits
//     for the readers or holds them back), so ReadMix / Contended can
//     reach no higher than Readers / Contended.
func Bench(b *testing.B, h Harness) {
	b.Run("Uncontended", func(b *testing.B) { benchUncontended(b, h, lockOne()) })
	b.Run("UncontendedShared", func(b *testing.B) { benchUncontended(b, h, lockOne(locker.Shared())) })
	b.Run("Subtree1", func(b *testing.B) { benchUncontended(b, h, lockPath(1)) })
	b.Run("Subtree5", func(b *testing.B) { benchUncontended(b, h, lockPath(5)) })
	b.Run("LockAll10", func(b *testing.B) { benchUncontended(b, h, lockTen(true)) })
	b.Run("Lock10", func(b *testing.B) { benchUncontended(b, h, lockTen(false)) })
	b.Run("Contended", func(b *testing.B) {
		res := benchContended(b, h, 8, time.Millisecond, contendOne)
		b.ReportMetric(float64(res.Hold(0.50).Microseconds())/1000, "hold-p50-ms")
		b.ReportMetric(float64(res.HandOff(0.50).Microseconds())/1000, "handoff-p50-ms")
		b.ReportMetric(float64(res.HandOff(1).Microseconds())/1000, "handoff-max-ms")
		reportCeiling(b, h, time.Millisecond, res.OpsPerSec())
	})
	b.Run("ReadMix", func(b *testing.B) { _ = benchContended(b, h, 8, time.Millisecond, ReadMix) })
	b.Run("Readers", func(b *testing.B) { _ = benchContended(b, h, 8, time.Millisecond, Readers) })
}

// takeFunc locks what an uncontended benchmark locks, below key, and
// returns the leases.
type takeFunc func(ctx context.Context, l locker.Locker, key string) ([]locker.Lease, error)

func lockOne(opts ...locker.Option) takeFunc {
	return func(ctx context.Context, l locker.Locker, key string) ([]locker.Lease, error) {
		lease, err := l.Lock(ctx, key, opts...)
		return []locker.Lease{lease}, err
	}
}

// lockPath locks a subtree path of the given depth: key's slashes
// replaced, so that the depth is the path's own.
func lockPath(depth int) takeFunc {
	return func(ctx context.Context, l locker.Locker, key string) ([]locker.Lease, error) {
		path := strings.ReplaceAll(key, "/", ":") + strings.Repeat("/d", depth-1)
		return lockOne(locker.Subtree())(ctx, l, path)
	}
}

// lockTen locks 10 keys with one LockAll (all) or one Lock each.
func lockTen(all bool) takeFunc {
	return func(ctx context.Context, l locker.Locker, key string) ([]locker.Lease, error) {
		keys := make([]string, 10)
		for i := range keys {
			keys[i] = fmt.Sprintf("%s%d", key, i)
		}
		if all {
			return locker.LockAll(ctx, l, keys)
		}
		leases := make([]locker.Lease, 0, len(keys))
		for _, k := range keys {
			lease, err := l.Lock(ctx, k)
			if err != nil {
				return nil, err
			}
			leases = append(leases, lease)
		}
		return leases, nil
	}
}

func benchUncontended(b *testing.B, h Harness, take takeFunc) {
	l := benchClient(b, h)
	key := benchKey(b, h)
	ctx := context.Background()
	// Round trips are timed between the lock+unlock pairs, not before them,
	// so that load on a shared machine weighs on both alike.
	var locking, rtt time.Duration
	for b.Loop() {
		t0 := time.Now()
		leases, err := take(ctx, l, key)
		if err != nil {
			b.Fatal(err)
		}
		for _, lease := range leases {
			if err := lease.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
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

// contendFunc is a contended workload: ContendKeys over one key, or ReadMix.
type contendFunc func(ctx context.Context, lockers []locker.Locker, key string, ops int, hold time.Duration, progress func()) (Contention, error)

// contendOne is Contend as a contendFunc.
func contendOne(ctx context.Context, lockers []locker.Locker, key string, ops int, hold time.Duration, progress func()) (Contention, error) {
	return ContendKeys(ctx, lockers, key, 1, ops, hold, progress)
}

// benchContended runs contend and reports its figures; it returns them.
func benchContended(b *testing.B, h Harness, workers int, hold time.Duration, contend contendFunc) Contention {
	lockers := make([]locker.Locker, workers)
	for i := range lockers {
		lockers[i] = benchClient(b, h)
	}
	key := benchKey(b, h)
	b.ResetTimer()
	res, err := contend(context.Background(), lockers, key, b.N, hold, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.OpsPerSec(), "ops/s")
	b.ReportMetric(float64(res.Wait(0.50).Microseconds())/1000, "p50-wait-ms")
	b.ReportMetric(float64(res.Wait(0.99).Microseconds())/1000, "p99-wait-ms")
	b.ReportMetric(res.Fairness(), "fairness")
	b.ReportMetric(res.Holders(), "holders")
	b.ReportMetric(100*res.Idle(), "idle-pct")
	return res
}

// reportCeiling reports the contended benchmark's ceiling, 1 / (hold as
// slept here + one round trip), and ops/s as a percentage of it (medians
// of a few of each, measured after the run).
func reportCeiling(b *testing.B, h Harness, hold time.Duration, ops float64) {
	if h.RoundTrip == nil || b.N < 2 {
		return
	}
	ctx := context.Background()
	slept, rtts := make([]time.Duration, 21), make([]time.Duration, 21)
	for i := range slept {
		t0 := time.Now()
		HoldFor(hold)
		slept[i] = time.Since(t0)
		t0 = time.Now()
		if err := h.RoundTrip(ctx); err != nil {
			return
		}
		rtts[i] = time.Since(t0)
	}
	slices.Sort(slept)
	slices.Sort(rtts)
	ceiling := 1 / (slept[10] + rtts[10]).Seconds()
	b.ReportMetric(ceiling, "ceiling-ops/s")
	b.ReportMetric(100*ops/ceiling, "pct-of-ceiling")
}
