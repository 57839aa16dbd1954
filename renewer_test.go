package locker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locker-go/locker/driver"
)

// batchDriver grants every request a batchHold and renews holds in
// batches, counting its calls. answer, if set, decides a hold's outcome in
// a batch; hang makes RefreshBatch wait for its ctx.
type batchDriver struct {
	reenter        bool // grant reHolds
	batches, alone atomic.Int64
	answer         func(h *batchHold) driver.Refreshed
	hang           atomic.Bool
	closed         atomic.Bool
	afterClose     atomic.Int64
}

// reHold is a batchHold whose re-entry the Locker counts (driver.Reenterer).
type reHold struct{ *batchHold }

func (h reHold) Reenter(context.Context, *driver.Request) (driver.Grant, error) {
	return driver.Grant{Hold: h, Fence: 1}, nil
}

type batchHold struct {
	d       *batchDriver
	key     string
	renewed atomic.Int64
}

func (d *batchDriver) Acquire(_ context.Context, r *driver.Request) (driver.Grant, error) {
	h := &batchHold{d: d, key: r.Key}
	if d.reenter {
		return driver.Grant{Hold: reHold{h}, Fence: 1}, nil
	}
	return driver.Grant{Hold: h, Fence: 1}, nil
}
func (d *batchDriver) Abandon(context.Context, *driver.Request) {}
func (d *batchDriver) Close(context.Context) error              { d.closed.Store(true); return nil }

func (d *batchDriver) RefreshBatch(ctx context.Context, hs []driver.Hold) ([]driver.Refreshed, error) {
	if d.closed.Load() {
		d.afterClose.Add(1)
	}
	d.batches.Add(1)
	if d.hang.Load() {
		<-ctx.Done()
		return nil, Unavailable(ctx.Err())
	}
	out := make([]driver.Refreshed, len(hs))
	for i, h := range hs {
		bh, ok := h.(*batchHold)
		if r, re := h.(reHold); re {
			bh, ok = r.batchHold, true
		}
		if !ok {
			return nil, fmt.Errorf("the batch holds a %T, not the driver's hold", h)
		}
		out[i] = driver.Refreshed{Valid: time.Hour} // trimmed to the TTL by the lease
		if d.answer != nil {
			out[i] = d.answer(bh)
		}
		if out[i].Err == nil {
			bh.renewed.Add(1)
		}
	}
	return out, nil
}

func (h *batchHold) Refresh(context.Context) (time.Duration, error) {
	h.d.alone.Add(1)
	h.renewed.Add(1)
	return time.Hour, nil
}
func (h *batchHold) Release(context.Context) error { return nil }

// lockMany takes n leases on distinct keys, kept alive with ttl.
func lockMany(t *testing.T, lk Locker, n int, ttl time.Duration) []Lease {
	t.Helper()
	leases := make([]Lease, n)
	for i := range leases {
		l, err := lk.Lock(context.Background(), fmt.Sprintf("k%d", i), WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	return leases
}

// until waits for cond, checked every millisecond, for at most limit.
func until(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(limit); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within %v: %s", limit, what)
		}
	}
}

// renewedAll reports whether every lease's hold was renewed n times.
func renewedAll(leases []Lease, n int64) bool {
	for _, l := range leases {
		h := l.(*lease).cfg.Hold
		if c, ok := h.(*countedHold); ok {
			h = c.h
		}
		if r, ok := h.(reHold); ok {
			h = r.batchHold
		}
		if h.(*batchHold).renewed.Load() < n {
			return false
		}
	}
	return true
}

// A Locker over a BatchRefresher renews its leases together: the driver
// calls grow with ticks, not with leases, and no hold is renewed alone.
func TestRenewalsAreBatched(t *testing.T) {
	d := &batchDriver{}
	lk := New(d)
	defer lk.Close()
	leases := lockMany(t, lk, 300, 400*time.Millisecond)
	until(t, 10*time.Second, "every lease renewed 3 times", func() bool { return renewedAll(leases, 3) })
	for _, l := range leases {
		if l.Err() != nil {
			t.Fatalf("lease %s ended: %v", l.Key(), l.Err())
		}
	}
	// 900 renewals; alone they would be 900 calls. On the grid of TTL/24
	// they are at most a few per period.
	t.Logf("300 leases renewed 3 times in %d batch calls", d.batches.Load())
	if b := d.batches.Load(); b > 60 {
		t.Errorf("%d batch calls for 300 leases renewed 3 times: renewals are not falling on shared ticks", b)
	}
	if a := d.alone.Load(); a != 0 {
		t.Errorf("%d holds were renewed alone", a)
	}
}

// A hold whose re-entry the Locker counts reaches the batch as the
// driver's own hold, its shared call slot taken for the call.
func TestBatchUnwrapsReenteredHolds(t *testing.T) {
	d := &batchDriver{reenter: true}
	lk := New(d)
	defer lk.Close()
	var leases []Lease
	for i := range 20 {
		l, err := lk.Lock(context.Background(), fmt.Sprintf("k%d", i), WithTTL(400*time.Millisecond), WithOwner("me"))
		if err != nil {
			t.Fatal(err)
		}
		if _, counted := l.(*lease).cfg.Hold.(*countedHold); !counted {
			t.Fatal("the Locker does not count this hold's re-entry: the test tests nothing")
		}
		leases = append(leases, l)
	}
	until(t, 10*time.Second, "every lease renewed twice", func() bool { return renewedAll(leases, 2) })
	for _, l := range leases {
		if l.Err() != nil {
			t.Fatalf("lease %s ended: %v", l.Key(), l.Err())
		}
	}
	if a := d.alone.Load(); a != 0 {
		t.Errorf("%d re-entered holds were renewed alone", a)
	}
}

// A hold the driver declines (ErrSkip) is renewed alone; one it finds not
// held ends its lease lost, and only that lease.
func TestBatchDeclinesAndLosses(t *testing.T) {
	d := &batchDriver{answer: func(h *batchHold) driver.Refreshed {
		switch h.key {
		case "k0":
			return driver.Refreshed{Err: driver.ErrSkip}
		case "k1":
			return driver.Refreshed{Err: ErrNotHeld}
		}
		return driver.Refreshed{Valid: time.Hour}
	}}
	lk := New(d)
	defer lk.Close()
	leases := lockMany(t, lk, 5, 400*time.Millisecond)
	select {
	case <-leases[1].Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lease whose hold the batch found gone did not end")
	}
	if !errors.Is(leases[1].Err(), ErrLeaseLost) {
		t.Errorf("lost lease: Err() = %v, want ErrLeaseLost", leases[1].Err())
	}
	until(t, 10*time.Second, "the others renewed twice", func() bool {
		return renewedAll(append([]Lease{leases[0]}, leases[2:]...), 2)
	})
	if d.alone.Load() == 0 {
		t.Error("the declined hold was never renewed alone")
	}
	for _, l := range append([]Lease{leases[0]}, leases[2:]...) {
		if l.Err() != nil {
			t.Errorf("lease %s ended: %v", l.Key(), l.Err())
		}
	}
}

// A batch that hangs (a backend that answers nothing) ends every lease in
// it by its Deadline, lost, and Close still returns.
func TestHungBatchEndsLeasesByTheirDeadline(t *testing.T) {
	d := &batchDriver{}
	d.hang.Store(true)
	lk := New(d)
	leases := lockMany(t, lk, 20, 120*time.Millisecond)
	for _, l := range leases {
		deadline := l.Deadline()
		select {
		case <-l.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("lease %s still open 5 s after its deadline", l.Key())
		}
		if !errors.Is(l.Err(), ErrLeaseLost) {
			t.Errorf("lease %s: Err() = %v, want ErrLeaseLost", l.Key(), l.Err())
		}
		if late := time.Since(deadline); late > time.Second {
			t.Errorf("lease %s ended %v after its deadline", l.Key(), late)
		}
	}
	if err := lk.Close(); err != nil {
		t.Fatal(err)
	}
	if d.afterClose.Load() != 0 {
		t.Error("a batch reached the driver after its Close")
	}
}

// Leases unlocked while their renewals are batched are released once, and
// Close waits for the renewer: no batch reaches a closed driver.
func TestBatchingAndUnlockRace(t *testing.T) {
	d := &batchDriver{}
	lk := New(d)
	leases := lockMany(t, lk, 100, 300*time.Millisecond)
	until(t, 10*time.Second, "every lease renewed once", func() bool { return renewedAll(leases, 1) })
	var wg sync.WaitGroup
	for _, l := range leases[:50] {
		wg.Go(func() {
			if err := l.Unlock(context.Background()); err != nil {
				t.Errorf("Unlock %s: %v", l.Key(), err)
			}
		})
	}
	wg.Wait()
	if err := lk.Close(); err != nil {
		t.Fatal(err)
	}
	if d.afterClose.Load() != 0 {
		t.Error("a batch reached the driver after its Close")
	}
	for _, l := range leases {
		if l.Err() == nil {
			t.Errorf("lease %s open after Close", l.Key())
		}
	}
}

// align never moves a renewal later, puts renewals a little apart on one
// tick, and periods a little apart on one grid.
func TestAlign(t *testing.T) {
	every := 800 * time.Millisecond
	base := atMono(1 << 40) // on every power-of-two grid up to 2^40 ns
	a, b := align(base.Add(10*time.Millisecond), every), align(base.Add(60*time.Millisecond), every)
	if !a.Equal(b) {
		t.Errorf("renewals 50 ms apart with a period of %v: %v and %v, want one tick", every, a, b)
	}
	if c := align(base.Add(10*time.Millisecond), every-3*time.Millisecond); !c.Equal(a) {
		t.Errorf("periods 3 ms apart: ticks %v and %v, want one", a, c)
	}
	for _, off := range []time.Duration{0, time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond} {
		at := base.Add(off)
		if got := align(at, every); got.After(at) || at.Sub(got) > every/8 {
			t.Errorf("align(%v) = %v: later, or more than an eighth of the period sooner", at, got)
		}
	}
}

// Renewal times keep the monotonic clock's reading, so that a step of the
// wall clock moves no renewal: the timers wait by it.
func TestRenewalTimesAreMonotonic(t *testing.T) {
	now := time.Now()
	for name, at := range map[string]time.Time{
		"align":      align(now.Add(time.Second), 3*time.Second),
		"a tick's":   atMono(monoAt(now.Add(time.Second))),
		"past epoch": align(epoch.Add(-time.Hour), time.Second),
	} {
		if !strings.Contains(at.String(), " m=") {
			t.Errorf("%s time %v has no monotonic reading", name, at)
		}
	}
	if got := align(epoch.Add(-time.Hour+time.Millisecond), time.Second); got.After(epoch.Add(-time.Hour + time.Millisecond)) {
		t.Errorf("align before epoch rounded up: %v", got)
	}
}

// shardDriver is a batchDriver whose holds of keys "a…" live on a server
// that hangs (driver.Sharder).
type shardDriver struct{ *batchDriver }

func (d shardDriver) Shard(h driver.Hold) string { return h.(*batchHold).key[:1] }

func (d shardDriver) RefreshBatch(ctx context.Context, hs []driver.Hold) ([]driver.Refreshed, error) {
	if d.Shard(hs[0]) == "a" {
		<-ctx.Done()
		return nil, Unavailable(ctx.Err())
	}
	return d.batchDriver.RefreshBatch(ctx, hs)
}

// A shard that hangs (a cluster's master) loses its own leases, by their
// Deadline; the other shard's are renewed meanwhile.
func TestShardThatHangsDelaysItsOwn(t *testing.T) {
	d := shardDriver{&batchDriver{}}
	lk := New(d)
	defer lk.Close()
	const ttl = 400 * time.Millisecond // loose: the whole suite may load the machine
	var a, b []Lease
	for i := range 10 {
		for _, s := range []string{"a", "b"} {
			l, err := lk.Lock(context.Background(), fmt.Sprintf("%s%d", s, i), WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			if s == "a" {
				a = append(a, l)
			} else {
				b = append(b, l)
			}
		}
	}
	for _, l := range a {
		select {
		case <-l.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("lease %s on the hung shard still open", l.Key())
		}
	}
	until(t, 10*time.Second, "the other shard's leases renewed 3 times", func() bool { return renewedAll(b, 3) })
	for _, l := range b {
		if l.Err() != nil {
			t.Errorf("lease %s on the live shard ended: %v", l.Key(), l.Err())
		}
	}
}

// schedule joins the latest tick already scheduled up to early sooner, so
// leases taken a few grid steps apart renew together; never a later tick.
func TestScheduleJoinsEarlierTick(t *testing.T) {
	r := newRenewer(nil, nil)
	defer func() { r.timer.Stop() }()
	base := monoAt(time.Now().Add(time.Hour))
	const early = int64(100 * time.Millisecond)
	a, b := &lease{}, &lease{}
	if got := r.schedule(a, 0, base, early); got != base {
		t.Fatalf("the first tick: %d, want %d", got, base)
	}
	if got := r.schedule(b, 0, base-early/2, early); got != base-early/2 {
		t.Errorf("a renewal before the only tick joined it: %d, want its own %d", got, base-early/2)
	}
	for _, c := range []struct {
		at, want int64
	}{
		{base + early/2, base},               // joins the latest tick at or before it
		{base + early, base},                 // at the edge of the window
		{base + early + 1, base + early + 1}, // past it: a tick of its own
	} {
		if got := r.schedule(&lease{}, 0, c.at, early); got != c.want {
			t.Errorf("schedule at %+d ms = %+d ms, want %+d ms", (c.at-base)/1e6, (got-base)/1e6, (c.want-base)/1e6)
		}
	}
	if n := len(r.buckets[base]); n != 3 {
		t.Errorf("%d leases on the first tick, want 3", n)
	}
}

// scheduled is how many leases r's schedule holds, over all its ticks.
func scheduled(r *renewer) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, b := range r.buckets {
		n += len(b)
	}
	return n
}

// A lease that ends leaves the renewals' schedule at once, and one
// renewed by hand leaves the tick it was on for its next: the schedule
// holds the live leases alone, so a Locker that takes and lets go of
// leases by the thousand keeps none of them in memory until the tick it
// would have renewed on (TTL/3 later; 100,000 lock+unlock pairs on mem
// had kept 93 MB so).
func TestEndedLeasesLeaveTheSchedule(t *testing.T) {
	lk := New(&batchDriver{})
	defer lk.Close()
	r := lk.(*portable).set.renew
	ctx := context.Background()
	for i := range 1000 {
		l, err := lk.Lock(ctx, fmt.Sprintf("churn%d", i%10), WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := scheduled(r); n != 0 {
		t.Errorf("%d leases on the schedule after 1,000 were taken and let go, want 0", n)
	}
	live := lockMany(t, lk, 3, time.Minute)
	if n := scheduled(r); n != 3 {
		t.Errorf("%d entries on the schedule for 3 live leases, want 3", n)
	}
	live[1].(*lease).lost("a test")
	if n := scheduled(r); n != 2 {
		t.Errorf("%d entries on the schedule after a lease was lost, want 2", n)
	}
	// Moved to a later tick (a Refresh's next renewal), a lease leaves
	// the tick it was on.
	l := live[0].(*lease)
	l.mu.Lock()
	was := l.sched
	l.sched = r.schedule(l, was, was+int64(time.Hour), 0)
	l.mu.Unlock()
	if n := scheduled(r); n != 2 {
		t.Errorf("%d entries on the schedule for 2 live leases, one moved to a later tick: want 2", n)
	}
}
