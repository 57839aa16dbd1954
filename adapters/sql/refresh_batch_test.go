package sql

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// One Locker's many kept-alive leases are renewed in batches: 200 leases
// of a 300 ms TTL, kept alive for three TTLs, cost a few statements per
// renewal period on every database, not one per lease (alone: a refresh
// each every TTL/3, some 1,800). Not in parallel, the databases one at a
// time, and under the race detector with a 1 s TTL: on a 2-core machine,
// the detector's CPU (SQLite is Go code too) had a 300 ms lease miss its
// renewals while the package's other tests ran, batched or not.
func TestRenewalsBatched(t *testing.T) {
	const n = 200
	ttl := 300 * time.Millisecond
	if testenv.Race {
		ttl = time.Second
	}
	for name, l := range countingLockers(t) {
		t.Run(name, func(t *testing.T) {
			prefix := "renew-" + rand.Text() + "/"
			leases := make([]locker.Lease, n)
			for i := range leases {
				var err error
				if leases[i], err = l.TryLock(context.Background(), fmt.Sprint(prefix, i), locker.WithTTL(ttl)); err != nil {
					t.Fatal(err)
				}
			}
			before := l.n.Load()
			time.Sleep(3 * ttl) // the keep-alive at work is what is measured
			used := l.n.Load() - before
			for _, lease := range leases {
				if lease.Err() != nil || !lease.Deadline().After(time.Now()) {
					t.Fatalf("lease %s ended: %v (deadline %v)", lease.Key(), lease.Err(), lease.Deadline())
				}
			}
			t.Logf("%d leases of TTL %v kept alive for 3×TTL with %d statements", n, ttl, used)
			if used >= n {
				t.Errorf("%d statements to keep %d leases alive for 3×TTL: renewals are not batched", used, n)
			}
		})
	}
}

// foreignHold is a hold of some other driver.
type foreignHold struct{}

func (foreignHold) Refresh(context.Context) (time.Duration, error) { return 0, nil }
func (foreignHold) Release(context.Context) error                  { return nil }

// batchCase is a RefreshBatch test's holds on d, under prefix.
type batchCase struct {
	t      *testing.T
	d      *sqlDriver
	prefix string
}

// take acquires key for owner in space and mode, for a minute.
func (c batchCase) take(key, owner string, space driver.Space, mode driver.Mode) *hold {
	c.t.Helper()
	g, err := c.d.Acquire(context.Background(), &driver.Request{Key: c.prefix + key, Owner: owner, ID: rand.Text(),
		Space: space, Mode: mode, Reentrant: owner == "x", TTL: time.Minute})
	if err != nil || g.Hold == nil {
		c.t.Fatalf("acquire %s: %v, %v", key, g.Hold != nil, err)
	}
	return g.Hold.(*hold)
}

// expires is when key's lock in space lapses.
func (c batchCase) expires(space driver.Space, key string) time.Time {
	c.t.Helper()
	info, err := c.d.Status(context.Background(), space, c.prefix+key)
	if err != nil {
		c.t.Fatalf("status %s: %v", key, err)
	}
	return info.Expires
}

// force frees key, whoever holds it.
func (c batchCase) force(key string) {
	c.t.Helper()
	if err := c.d.ForceUnlock(context.Background(), driver.Plain, c.prefix+key); err != nil {
		c.t.Fatal(err)
	}
}

// withTTL is h, renewed by ttl.
func withTTL(h *hold, ttl time.Duration) *hold {
	return &hold{d: h.d, key: h.key, owner: h.owner, id: h.id, fence: h.fence, ttl: ttl, mode: h.mode, waited: h.waited}
}

// countBatches counts l's batch statements, and the holds of each, until
// the test ends.
func countBatches(t *testing.T, l *testLocker) *[]int {
	var mu sync.Mutex
	sizes := new([]int)
	real := l.refreshBatchOnce
	l.refreshBatchOnce = func(ctx context.Context, d *sqlDriver, hs []*hold) ([]bool, error) {
		mu.Lock()
		*sizes = append(*sizes, len(hs))
		mu.Unlock()
		return real(ctx, d, hs)
	}
	t.Cleanup(func() { l.refreshBatchOnce = real })
	return sizes
}

// In one RefreshBatch, each hold answers as its Refresh would: the holds
// still ours are extended (a key's by the longest of its holds, each
// round of distinct keys in one statement); one whose key was forced
// free, or forced and taken over, is ErrNotHeld and leaves the new
// owner's expiry alone; a Shared hold and another driver's are declined.
func TestRefreshBatchDirect(t *testing.T) {
	ls := dialects(t)
	t.Parallel()
	for name, l := range ls {
		t.Run(name, func(t *testing.T) {
			c := batchCase{t, l.sqlDriver, "rb-" + rand.Text() + "/"}
			a, b := c.take("a", "me", driver.Plain, driver.Exclusive), c.take("b", "me", driver.Plain, driver.Exclusive)
			taken, forced := c.take("c", "me", driver.Plain, driver.Exclusive), c.take("d", "me", driver.Plain, driver.Exclusive)
			e1, e2 := c.take("e", "x", driver.Plain, driver.Exclusive), c.take("e", "x", driver.Plain, driver.Exclusive)
			sub, shared := c.take("f", "me", driver.Subtree, driver.Exclusive), c.take("g", "me", driver.Plain, driver.Shared)
			c.force("c")
			c.force("d")
			c.take("c", "other", driver.Plain, driver.Exclusive)
			otherExp := c.expires(driver.Plain, "c")
			sizes := countBatches(t, l)
			const longer, longest = 2 * time.Minute, 3 * time.Minute
			hs := []driver.Hold{withTTL(a, longer), withTTL(b, longer), taken, forced, withTTL(e1, 30*time.Second),
				withTTL(e2, longest), withTTL(sub, longer), shared, foreignHold{}}
			start := time.Now()
			out, err := c.d.RefreshBatch(context.Background(), hs)
			if err != nil || len(out) != len(hs) {
				t.Fatalf("RefreshBatch = %d outcomes, %v; want %d", len(out), err, len(hs))
			}
			for i, want := range []error{nil, nil, locker.ErrNotHeld, locker.ErrNotHeld, nil, nil, nil, driver.ErrSkip, driver.ErrSkip} {
				if !errors.Is(out[i].Err, want) || want == nil && out[i].Valid != c.d.valid(hs[i].(*hold).ttl) {
					t.Errorf("hold %d: %+v, want error %v (valid: its TTL less the clock's tick)", i, out[i], want)
				}
			}
			if want := []int{5, 1}; fmt.Sprint(*sizes) != fmt.Sprint(want) { // a-e, then e's second
				t.Errorf("plain holds' statements: %v holds each, want %v", *sizes, want)
			}
			for key, ttl := range map[string]time.Duration{"a": longer, "b": longer, "e": longest} {
				if exp := c.expires(driver.Plain, key); exp.Before(start.Add(ttl - 5*time.Second)) {
					t.Errorf("%s expires in %v after the refresh, want about %v", key, time.Until(exp), ttl)
				}
			}
			if exp := c.expires(driver.Subtree, "f"); exp.Before(start.Add(longer - 5*time.Second)) {
				t.Errorf("subtree f expires in %v after the refresh, want about %v", time.Until(exp), longer)
			}
			if exp := c.expires(driver.Plain, "c"); !exp.Equal(otherExp) {
				t.Errorf("the new owner's row of c: expiry moved from %v to %v", otherExp, exp)
			}
			if _, err := c.d.Status(context.Background(), driver.Plain, c.prefix+"d"); !errors.Is(err, locker.ErrNotHeld) {
				t.Errorf("forced d: status %v, want no row", err)
			}
		})
	}
}

// A refresh by a shorter TTL than the row's expiry leaves it, and is ours
// all the same (on MySQL, an UPDATE that changes no row, told apart from
// a hold not ours by a read).
func TestRefreshBatchNeverShortens(t *testing.T) {
	ls := dialects(t)
	t.Parallel()
	for name, l := range ls {
		t.Run(name, func(t *testing.T) {
			c := batchCase{t, l.sqlDriver, "rbs-" + rand.Text() + "/"}
			a, b := c.take("a", "me", driver.Plain, driver.Exclusive), c.take("b", "me", driver.Plain, driver.Exclusive)
			c.force("b")
			before := c.expires(driver.Plain, "a")
			out, err := c.d.RefreshBatch(context.Background(), []driver.Hold{withTTL(a, time.Second), b})
			if err != nil || out[0].Err != nil || out[0].Valid != c.d.valid(time.Second) || !errors.Is(out[1].Err, locker.ErrNotHeld) {
				t.Fatalf("RefreshBatch = %+v, %v; want a renewed for 1s, b ErrNotHeld", out, err)
			}
			if after := c.expires(driver.Plain, "a"); !after.Equal(before) {
				t.Errorf("a 1s refresh moved a minute's expiry from %v to %v", before, after)
			}
		})
	}
}
