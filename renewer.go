package locker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/locker-go/locker/driver"
)

// renewer renews a Locker's kept-alive leases in batches, over a
// driver.BatchRefresher: one goroutine per Locker, started with the first
// renewal, and one driver call per batch, so that a Locker with 10,000
// leases costs backend calls per tick, not per lease. Renewals fall on
// shared ticks because each lease's next renewal is rounded down to a grid
// (see align): leases with one TTL renew together.
type renewer struct {
	b     driver.BatchRefresher
	set   *leaseSet
	start sync.Once
	kick  chan struct{}

	mu  sync.Mutex
	due []*lease
}

// gather is how long a batch waits, once one renewal is due, for the
// others of its tick: far below any renewal period's margin (TTL/3 at
// least remains when a renewal is due).
const gather = time.Millisecond

// batchMax bounds the holds of one driver call; a larger batch is split.
const batchMax = 1000

func newRenewer(b driver.BatchRefresher, set *leaseSet) *renewer {
	return &renewer{b: b, set: set, kick: make(chan struct{}, 1)}
}

// add queues l, whose renewal is due, for the next batch.
func (r *renewer) add(l *lease) {
	r.start.Do(func() { r.set.spawn(r.run) })
	r.mu.Lock()
	r.due = append(r.due, l)
	r.mu.Unlock()
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
			r.drain()
			return
		case <-r.kick:
		}
		// The leases of one tick come due within moments of each other
		// (a timer each): gather them into one batch.
		select {
		case <-r.set.ctx.Done():
			r.drain()
			return
		case <-time.After(gather):
		}
		r.mu.Lock()
		due := r.due
		r.due = nil
		r.mu.Unlock()
		for len(due) > 0 {
			n := min(len(due), batchMax)
			r.batch(due[:n])
			due = due[n:]
		}
	}
}

// drain lets the leases still queued at Close renew alone: Close is
// releasing them, which their renewal waits for and then finds done.
func (r *renewer) drain() {
	r.mu.Lock()
	due := r.due
	r.due = nil
	r.mu.Unlock()
	for _, l := range due {
		l.renewed(ErrNotHeld)
	}
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

// align rounds a renewal time down to a grid of an eighth of the renewal
// period, so that leases renewed at about the same time land on the same
// tick. It renews at most that much sooner: never later.
func align(t time.Time, every time.Duration) time.Time {
	return t.Truncate(max(every/8, time.Millisecond))
}
