package locker

import (
	"container/heap"
	"context"
	"errors"
	"math/bits"
	"sync"
	"time"

	"github.com/locker-go/locker/driver"
)

// renewer renews a Locker's kept-alive leases in batches, over a
// driver.BatchRefresher, so that a Locker with 10,000 leases costs backend
// calls per tick, not per lease: it keeps the leases' renewals on a
// schedule of ticks, with one timer for the next tick; one goroutine,
// started with the first renewal, takes each tick's leases, and a
// goroutine per shard (driver.Sharder; one without) makes the driver call.
// Renewals fall on shared ticks because each lease's next renewal is
// rounded down to a grid (see align): leases with one TTL renew together.
// A lease's own timer then wakes only at its deadline.
type renewer struct {
	b     driver.BatchRefresher
	set   *leaseSet
	start sync.Once
	kick  chan struct{}

	mu      sync.Mutex
	due     []due
	ticks   tickHeap                      // the ticks scheduled, earliest first
	buckets map[int64]map[*lease]struct{} // the leases to renew at each tick (monoAt)
	timer   *time.Timer                   // fires at armed
	armed   int64                         // 0: the timer is not set
}

// due is a lease whose renewal came due at tick at; the lease may have
// been scheduled anew meanwhile (lease.sched), which makes this one stale.
type due struct {
	l  *lease
	at int64
}

// batchMax bounds the holds of one driver call; a larger batch is split.
const batchMax = 1000

func newRenewer(b driver.BatchRefresher, set *leaseSet) *renewer {
	return &renewer{b: b, set: set, kick: make(chan struct{}, 1), buckets: map[int64]map[*lease]struct{}{}}
}

// schedule has l renewed at tick at (monoAt), or at the latest tick
// already scheduled up to early sooner, and returns the tick it chose;
// was is l's tick so far (0: none), which it leaves. Joining a tick
// merges renewals that the grid alone would keep apart for good (leases
// taken over a few grid steps, on a slow machine, each on their own tick
// every period): they renew a little sooner, never later.
func (r *renewer) schedule(l *lease, was, at, early int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.buckets[was], l)
	join := int64(0)
	for _, t := range r.ticks {
		if t <= at && t >= at-early && t > join {
			join = t
		}
	}
	if join != 0 {
		at = join
	}
	b, ok := r.buckets[at]
	if !ok {
		b = map[*lease]struct{}{}
		r.buckets[at] = b
		heap.Push(&r.ticks, at)
	}
	b[l] = struct{}{}
	if r.armed == 0 || at < r.armed {
		r.arm(at)
	}
	return at
}

// drop takes l off tick at (0: none), as it ends: the schedule holds only
// leases that may renew, so that a Locker that takes and lets go of
// leases by the thousand a second keeps none of them in memory until its
// tick (TTL/3 later).
func (r *renewer) drop(l *lease, at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.buckets[at], l) // an emptied tick stays in the heap until it fires
}

// arm sets the timer for tick at. Callers hold r.mu.
func (r *renewer) arm(at int64) {
	r.armed = at
	d := time.Duration(at - monoAt(time.Now()))
	if r.timer == nil {
		r.timer = time.AfterFunc(d, r.fire)
	} else {
		r.timer.Reset(d)
	}
}

// fire moves the leases of every tick that has come to due, and wakes the
// goroutine that renews them.
func (r *renewer) fire() {
	now := monoAt(time.Now())
	r.mu.Lock()
	for len(r.ticks) > 0 && r.ticks[0] <= now {
		at := heap.Pop(&r.ticks).(int64)
		for l := range r.buckets[at] {
			r.due = append(r.due, due{l, at})
		}
		delete(r.buckets, at)
	}
	r.armed = 0
	if len(r.ticks) > 0 {
		r.arm(r.ticks[0])
	}
	r.mu.Unlock()
	r.start.Do(func() { r.set.spawn(r.run) })
	select {
	case r.kick <- struct{}{}:
	default: // a batch is pending already
	}
}

// run makes a batch of whatever is due, each time some is, until the
// Locker closes (Close waits for it: it is a background call of the set).
func (r *renewer) run() {
	for {
		select {
		case <-r.set.ctx.Done():
			r.stop()
			return
		case <-r.kick:
		}
		r.mu.Lock()
		ds := r.due
		r.due = nil
		r.mu.Unlock()
		shards := map[string][]*lease{}
		for _, d := range ds {
			if d.l.startRenewal(d.at) {
				s := r.shard(d.l)
				shards[s] = append(shards[s], d.l)
			}
		}
		for _, leases := range shards {
			// Each shard's batches on their own: one that hangs holds up
			// neither the other shards nor the next tick (its leases are
			// not renewed again while it lasts). Close waits for them.
			r.set.spawn(func() {
				for len(leases) > 0 {
					n := min(len(leases), batchMax)
					r.batch(leases[:n])
					leases = leases[n:]
				}
			})
		}
	}
}

// shard is the server of l's hold, where the driver has several
// (driver.Sharder): each shard's leases are renewed in calls of their own.
func (r *renewer) shard(l *lease) string {
	s, ok := r.b.(driver.Sharder)
	if !ok {
		return ""
	}
	h := l.cfg.Hold
	if c, counted := h.(*countedHold); counted {
		h = c.h
	}
	return s.Shard(h)
}

// stop ends the schedule at Close, which is releasing every lease.
func (r *renewer) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer != nil {
		r.timer.Stop()
	}
	r.due, r.ticks, r.buckets = nil, nil, map[int64]map[*lease]struct{}{}
}

// tickHeap is a min-heap of ticks (container/heap).
type tickHeap []int64

func (h tickHeap) Len() int           { return len(h) }
func (h tickHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h tickHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *tickHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *tickHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// batch renews leases in one driver call. A lease whose backend call slot
// is taken (an Unlock or Refresh under way), or whose hold the driver
// declines, renews alone, as without a BatchRefresher.
func (r *renewer) batch(leases []*lease) {
	taken := make([]*lease, 0, len(leases))
	holds := make([]driver.Hold, 0, len(leases))
	var shared []slot // the call slots of re-entered holds taken
	deadline := time.Time{}
	for _, l := range leases {
		h, s, ok := l.take()
		if !ok {
			go l.renew()
			continue
		}
		if l.Err() != nil {
			l.free(s)
			l.renewed(ErrNotHeld)
			continue
		}
		taken, holds, shared = append(taken, l), append(holds, h), append(shared, s)
		if d := l.Deadline(); deadline.IsZero() || d.Before(deadline) {
			deadline = d
		}
	}
	if len(taken) == 0 {
		return
	}
	// Bounded by the first deadline: a backend that hangs must not keep
	// the others' renewals waiting past it.
	ctx, cancel := context.WithDeadline(r.set.ctx, deadline)
	defer cancel()
	start := time.Now()
	out, err := r.b.RefreshBatch(ctx, holds)
	for i, l := range taken {
		var res driver.Refreshed
		switch {
		case err != nil:
			res.Err = err
		case i < len(out):
			res = out[i]
		default:
			res.Err = errors.New("locker: driver answered fewer refreshes than asked")
		}
		if errors.Is(res.Err, driver.ErrSkip) {
			l.free(shared[i])
			go l.renew()
			continue
		}
		err := l.refreshed(start, res.Valid, res.Err)
		l.free(shared[i])
		l.renewed(err)
	}
}

// take takes l's call slot for a batch, and the driver's hold behind it:
// a hold the Locker counts re-entry of (reentry.go) is the driver's hold,
// with the slot its leases share, also taken. It does not wait: ok is
// false if either slot is taken.
func (l *lease) take() (h driver.Hold, shared slot, ok bool) {
	select {
	case l.op <- struct{}{}:
	default:
		return nil, nil, false
	}
	c, counted := l.cfg.Hold.(*countedHold)
	if !counted {
		return l.cfg.Hold, nil, true
	}
	select {
	case c.c.op <- struct{}{}:
		return c.h, c.c.op, true
	default:
		l.op.unlock()
		return nil, nil, false
	}
}

// free gives back the slots take took.
func (l *lease) free(shared slot) {
	if shared != nil {
		shared.unlock()
	}
	l.op.unlock()
}

// align rounds a renewal time down to a grid, so that leases renewed at
// about the same time land on the same tick: the grid is the largest power
// of two nanoseconds up to an eighth of the renewal period, the same for
// periods a little apart (a validity that varies with each renewal). It
// renews at most that much sooner: never later.
func align(t time.Time, every time.Duration) time.Time {
	g := max(every/8, time.Millisecond)
	q := int64(1) << (bits.Len64(uint64(g)) - 1)
	n := monoAt(t)
	return atMono(n - (n%q+q)%q) // rounded down, before epoch too
}
