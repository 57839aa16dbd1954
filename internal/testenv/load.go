package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance/history"
)

// Load is the fault matrix's load run on the backend at url: 400 waiters
// on one key over 8 Lockers, then 64 clients over 1,000 keys, 32 grants
// each. Every grant updates its key's fenced counter; every call is
// recorded and the history checked against a fenced lease. Every Lock and
// Unlock must succeed and every counter be exact.
//
// Load skips under the race detector: it measures the backend at scale,
// and under the detector (5–10× the CPU) on a 2-core machine running other
// packages' tests it measured the detector instead (Redlock's masters went
// unanswered past the node timeout). scripts/test runs it in its non-race
// step, one package at a time.
func Load(t *testing.T, url string) {
	t.Helper()
	if Race {
		t.Skip("the load run does not run under -race: scripts/test runs it in its non-race step (go test -run TestLoad ./adapters/...)")
	}
	const lockers, waiters, clients, keys, rounds = 8, 400, 64, 1000, 32
	ls := make([]locker.Locker, lockers)
	for i := range ls {
		l, err := locker.Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		ls[i] = l
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	run := &loadRun{rec: history.New(), prefix: fmt.Sprintf("load-%d/", rand.Uint64())}
	start := time.Now()
	run.clients(waiters, func(i int, c *history.Client) { run.grant(ctx, c, ls[i%lockers], "one") })
	oneKey := time.Since(start)
	run.clients(clients, func(i int, c *history.Client) {
		for range rounds {
			run.grant(ctx, c, ls[i%lockers], fmt.Sprint(rand.IntN(keys)))
		}
	})
	t.Logf("%d waiters on one key: %v; %d clients × %d grants over %d keys: %v",
		waiters, oneKey.Round(time.Millisecond), clients, rounds, keys, (time.Since(start) - oneKey).Round(time.Millisecond))
	run.check(t, waiters+clients*rounds)
}

// ManyLockers is defect 4's load run: n waiters on one key, each through
// a Locker of its own opened on url, as n processes would be. Waiting must
// not cost a backend connection per waiter, and a holder's refresh must not
// queue behind the waiters: every Lock and Unlock must succeed, the counter
// be exact, the history linearizable. It skips under -race, as Load does.
func ManyLockers(t *testing.T, url string, n int) {
	t.Helper()
	if Race {
		t.Skip("the load run does not run under -race: scripts/test runs it in its non-race step (go test -run TestLoad ./adapters/...)")
	}
	ls := make([]locker.Locker, n)
	for i := range ls {
		l, err := locker.Open(t.Context(), url)
		if err != nil {
			t.Fatalf("Locker %d of %d: %v", i+1, n, err)
		}
		t.Cleanup(func() { _ = l.Close() })
		ls[i] = l
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	run := &loadRun{rec: history.New(), prefix: fmt.Sprintf("many-%d/", rand.Uint64())}
	start := time.Now()
	run.clients(n, func(i int, c *history.Client) { run.grant(ctx, c, ls[i], "one") })
	t.Logf("%d waiters on one key, each its own Locker: %v", n, time.Since(start).Round(time.Millisecond))
	run.check(t, n)
}

// loadRun is what Load's clients share.
type loadRun struct {
	rec      *history.Recorder
	prefix   string
	counters sync.Map // key -> *history.FencedCounter
	mu       sync.Mutex
	errs     []error
}

// clients runs n recorded clients of fn at once and waits for them.
func (r *loadRun) clients(n int, fn func(i int, c *history.Client)) {
	var wg sync.WaitGroup
	for i := range n {
		c := r.rec.Client()
		wg.Go(func() { fn(i, c) })
	}
	wg.Wait()
}

// grant takes key, adds one to its fenced counter and lets it go.
func (r *loadRun) grant(ctx context.Context, c *history.Client, l locker.Locker, key string) {
	key = r.prefix + key
	lease, err := c.Lock(ctx, l, key)
	if err == nil {
		ctr, _ := r.counters.LoadOrStore(key, new(history.FencedCounter))
		fc := ctr.(*history.FencedCounter)
		fc.Write(lease.Fence(), fc.Read()+1)
		err = lease.Unlock(context.Background())
	}
	if err != nil {
		r.mu.Lock()
		r.errs = append(r.errs, err)
		r.mu.Unlock()
	}
}

// check fails t on any failed call, a counter short of its writes, a sum
// short of the grants, or a history that is not linearizable.
func (r *loadRun) check(t *testing.T, grants int) {
	t.Helper()
	if len(r.errs) > 0 {
		t.Errorf("%d Lock/Unlock calls failed, e.g. %v", len(r.errs), r.errs[0])
	}
	sum := 0
	r.counters.Range(func(k, v any) bool {
		value, accepted := v.(*history.FencedCounter).Exact()
		if value != accepted {
			t.Errorf("key %s: counter %d after %d accepted writes: an update was lost", k, value, accepted)
		}
		sum += value
		return true
	})
	if len(r.errs) == 0 && sum != grants {
		t.Errorf("counters sum to %d; want %d grants", sum, grants)
	}
	if err := r.rec.Check(t.Context()); err != nil {
		history.WriteArtifact(t, err)
		t.Error(err)
	}
}
