package conformance

// The contended-lock workloads that Bench and `locker bench` share, and
// the statistics they report.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locker-go/locker"
)

// Contention is what one contended run measured.
type Contention struct {
	Ops      int
	Elapsed  time.Duration
	Waits    []time.Duration // per acquisition, sorted
	PerOwner []int           // acquisitions per Locker
	spans    []span          // each acquisition's hold: its grant to its Unlock call
}

// span is the time a worker held a key.
type span struct{ from, to time.Time }

// OpsPerSec is the handoff throughput.
func (c Contention) OpsPerSec() float64 { return float64(c.Ops) / c.Elapsed.Seconds() }

// Wait returns the q-quantile (0..1) of the waits.
func (c Contention) Wait(q float64) time.Duration { return Quantile(c.Waits, q) }

// Fairness is Jain's index of the acquisitions per Locker, (Σx)²/(n·Σx²):
// 1 when every Locker got the key equally often, 1/n when one got it every
// time; unlike max/min, one unlucky Locker in a short run does not throw it.
func (c Contention) Fairness() float64 {
	var sum, sq float64
	for _, n := range c.PerOwner {
		sum += float64(n)
		sq += float64(n) * float64(n)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(c.PerOwner)) * sq)
}

// Holders is the mean number of workers holding a key while any held one
// (over every key of the run): 1 for an exclusive key, up to the workers
// for readers that hold together. Readers near 1 are waiting for one
// another.
func (c Contention) Holders() float64 {
	busy, area := c.sweep()
	if busy == 0 {
		return 0
	}
	return area.Seconds() / busy.Seconds()
}

// Idle is the share of the run in which no worker held a key: with one
// key, the hand-offs' cost, as it passed from holder to holder.
func (c Contention) Idle() float64 {
	busy, _ := c.sweep()
	if c.Elapsed <= 0 {
		return 0
	}
	return max(0, 1-busy.Seconds()/c.Elapsed.Seconds())
}

// Hold returns the q-quantile (0..1) of the holds, each from its grant to
// its Unlock call: the hold the workload asked for, as long as the
// machine took to sleep it beside the lock's own work.
func (c Contention) Hold(q float64) time.Duration {
	ds := make([]time.Duration, len(c.spans))
	for i, s := range c.spans {
		ds[i] = s.to.Sub(s.from)
	}
	slices.Sort(ds)
	return Quantile(ds, q)
}

// HandOff returns the q-quantile (0..1) of the hand-offs of a run on one
// exclusive key: from a hold's end (its Unlock call) to the next grant.
// Hold and HandOff split a hand-off's period into the part spent holding
// and the part with nobody holding; over several keys, or with readers
// that hold together, the holds overlap and HandOff means nothing.
func (c Contention) HandOff(q float64) time.Duration {
	spans := slices.SortedFunc(slices.Values(c.spans), func(a, b span) int { return a.from.Compare(b.from) })
	var ds []time.Duration
	for i := 1; i < len(spans); i++ {
		ds = append(ds, max(spans[i].from.Sub(spans[i-1].to), 0))
	}
	slices.Sort(ds)
	return Quantile(ds, q)
}

// sweep returns the time in which any worker held a key (busy), and the
// sum of every hold (area).
func (c Contention) sweep() (busy, area time.Duration) {
	type edge struct {
		at time.Time
		d  int
	}
	edges := make([]edge, 0, 2*len(c.spans))
	for _, s := range c.spans {
		edges = append(edges, edge{s.from, 1}, edge{s.to, -1})
		area += s.to.Sub(s.from)
	}
	slices.SortFunc(edges, func(a, b edge) int { return a.at.Compare(b.at) })
	held := 0
	for i, e := range edges {
		if held > 0 {
			busy += e.at.Sub(edges[i-1].at)
		}
		held += e.d
	}
	return busy, area
}

// Contend has each of lockers (each its own client, like a process) take
// key in turn, ops times in all, holding it for hold each time: the
// workload of Bench's Contended, for use outside go test. The first error
// stops every worker.
func Contend(ctx context.Context, lockers []locker.Locker, key string, ops int, hold time.Duration) (Contention, error) {
	return ContendKeys(ctx, lockers, key, 1, ops, hold, nil)
}

// ContendKeys is Contend over keys keys, calling progress (if not nil)
// after each acquisition: the n-th acquisition takes key
// "<key>/<n mod keys>" (key itself when keys is 1), so that the workers
// spread over the keys, as a service's locks do over its records.
func ContendKeys(ctx context.Context, lockers []locker.Locker, key string, keys, ops int, hold time.Duration, progress func()) (Contention, error) {
	return contend(ctx, lockers, keyOf(key, keys), ops, hold, progress, func(int64) []locker.Option { return nil })
}

// keyOf names the n-th acquisition's key among keys.
func keyOf(key string, keys int) func(n int64) string {
	if keys <= 1 {
		return func(int64) string { return key }
	}
	return func(n int64) string { return fmt.Sprintf("%s/%d", key, n%int64(keys)) }
}

// ReadShare is the share of ReadMix's acquisitions that are shared.
const ReadShare = 0.9

// ReadMix is Contend with nine acquisitions in ten shared (readers) and
// the tenth exclusive (a writer), as a read-heavy service locks.
func ReadMix(ctx context.Context, lockers []locker.Locker, key string, ops int, hold time.Duration, progress func()) (Contention, error) {
	shared := []locker.Option{locker.Shared()}
	return contend(ctx, lockers, keyOf(key, 1), ops, hold, progress, func(n int64) []locker.Option {
		if n%10 == 0 {
			return nil
		}
		return shared
	})
}

// Readers is Contend with every acquisition shared: the bound of a
// ReadMix on the same key and machine, where no writer waits.
func Readers(ctx context.Context, lockers []locker.Locker, key string, ops int, hold time.Duration, progress func()) (Contention, error) {
	shared := []locker.Option{locker.Shared()}
	return contend(ctx, lockers, keyOf(key, 1), ops, hold, progress, func(int64) []locker.Option { return shared })
}

// contend is Contend with key(n) and opts(n) the key and options of the
// n-th acquisition.
func contend(ctx context.Context, lockers []locker.Locker, key func(n int64) string, ops int, hold time.Duration, progress func(), opts func(n int64) []locker.Option) (Contention, error) {
	var (
		mu    sync.Mutex
		res   = Contention{PerOwner: make([]int, len(lockers))}
		taken atomic.Int64
		wg    sync.WaitGroup
		first error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
			cancel() // stop the other workers' waits
		}
	}
	start := time.Now()
	for i, l := range lockers {
		wg.Go(func() {
			for n := taken.Add(1); n <= int64(ops); n = taken.Add(1) {
				t0 := time.Now()
				lease, err := l.Lock(ctx, key(n), opts(n)...)
				if err != nil {
					fail(err)
					return
				}
				granted := time.Now()
				HoldFor(hold) // the work under the lock
				held := span{granted, time.Now()}
				if err := lease.Unlock(ctx); err != nil {
					fail(fmt.Errorf("unlock: %w", err))
					return
				}
				mu.Lock()
				res.Waits = append(res.Waits, granted.Sub(t0))
				res.spans = append(res.spans, held)
				res.PerOwner[i]++
				res.Ops++
				mu.Unlock()
				if progress != nil {
					progress()
				}
			}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	slices.Sort(res.Waits)
	return res, first
}

// Quantile returns the q-quantile (0..1) of sorted: the smallest value
// with at least q of them at or below it.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1 // ceil(q·n)-1
	return sorted[max(0, min(len(sorted)-1, i))]
}
