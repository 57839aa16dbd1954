package locker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/backoff"
)

// The lease every driver's holds are wrapped in: the Deadline, the
// keep-alive loop, Done/Err bookkeeping. A driver supplies only the
// backend calls (driver.Hold).

// leaseConfig describes a newly acquired lease.
type leaseConfig struct {
	Key, Owner string
	Fence      uint64
	TTL        time.Duration
	KeepAlive  bool
	// Start is when the acquiring call began; the first deadline is
	// Start+Validity, so time spent acquiring counts against the lease.
	Start    time.Time
	Validity time.Duration // defaults to TTL
	Hold     driver.Hold
	Lost     context.Context // done when the backend says the hold is gone
}

// lease implements Lease over a driver.Hold.
type lease struct {
	cfg  leaseConfig
	set  *leaseSet
	done chan struct{}
	tick sync.Mutex // one timer callback at a time

	// op orders a lease's backend calls: one Release however many Unlock
	// calls race, and no renewal overlapping it, so a renewal that finds
	// the lock gone after our own Unlock cannot call the lease lost. A
	// caller waiting for the slot gives up when its ctx ends.
	op slot

	mu        sync.Mutex
	deadline  time.Time
	next      time.Time     // next renewal, with keep-alive
	every     time.Duration // renewal period: TTL/3, or less if the validity is short
	timer     *time.Timer   // wakes onTimer at min(next, deadline)
	renewing  bool          // a keep-alive renewal is under way
	releasing bool          // an Unlock failed: no more renewals (see releaseLater)
	err       error
	stopLost  func() bool // stops watching cfg.Lost
	sched     int64       // the renewer's tick for its next renewal (monoAt); 0: none
}

// newLease starts a lease and adds it to set, whose Close will release it. If
// set is already closed, the hold is released and newLease returns ErrClosed.
func newLease(set *leaseSet, cfg leaseConfig) (*lease, error) {
	if cfg.Validity <= 0 {
		cfg.Validity = cfg.TTL
	}
	l := &lease{
		cfg:      cfg,
		set:      set,
		done:     make(chan struct{}),
		op:       make(slot, 1),
		deadline: cfg.Start.Add(cfg.Validity),
	}
	l.every = renewEvery(cfg.TTL, cfg.Validity)
	l.next = l.nextRenewal(cfg.Start)
	if !set.add(l) {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.TTL)
		defer cancel()
		_ = cfg.Hold.Release(ctx)
		return nil, ErrClosed
	}
	// A timer, not a goroutine: a lease unlocked before its first renewal
	// never costs a goroutine or a wake-up.
	l.mu.Lock()
	l.timer = time.AfterFunc(l.wakeIn(), l.onTimer)
	l.scheduleLocked()
	l.mu.Unlock()
	if cfg.Lost != nil {
		stop := context.AfterFunc(cfg.Lost, func() { l.lost("the backend reported its hold gone") })
		l.mu.Lock()
		if l.err != nil { // over already
			stop()
		}
		l.stopLost = stop
		l.mu.Unlock()
	}
	return l, nil
}

func (l *lease) Key() string           { return l.cfg.Key }
func (l *lease) Owner() string         { return l.cfg.Owner }
func (l *lease) Fence() uint64         { return l.cfg.Fence }
func (l *lease) Done() <-chan struct{} { return l.done }

func (l *lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

func (l *lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Refresh extends the lease through Hold.Refresh.
func (l *lease) Refresh(ctx context.Context) error {
	if l.set.closedNow() {
		return ErrClosed
	}
	if err := l.refresh(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	l.next = l.nextRenewal(time.Now())
	l.rearm()
	l.mu.Unlock()
	return nil
}

func (l *lease) refresh(ctx context.Context) error {
	if err := l.op.lock(ctx); err != nil {
		return err
	}
	defer l.op.unlock()
	if l.Err() != nil {
		return ErrNotHeld
	}
	start := time.Now()
	valid, err := l.cfg.Hold.Refresh(ctx)
	return l.refreshed(start, valid, err)
}

// refreshed applies the outcome of a renewal that began at start. The
// caller holds l.op.
func (l *lease) refreshed(start time.Time, valid time.Duration, err error) error {
	if errors.Is(err, ErrNotHeld) {
		l.lost("a renewal found its hold gone")
		return ErrNotHeld
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		// It ended at its deadline while the renewal hung, which then
		// landed after all: let the key go rather than keep it for a
		// lease nobody holds.
		l.set.spawn(l.giveUp)
		return ErrNotHeld
	}
	if d := start.Add(valid); d.After(l.deadline) {
		l.deadline = d
	}
	l.every = renewEvery(l.cfg.TTL, valid)
	return nil
}

// giveUp releases the hold of an ended lease, best-effort, after the
// backend call under way.
func (l *lease) giveUp() {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.TTL)
	defer cancel()
	if l.op.lock(ctx) != nil {
		return
	}
	defer l.op.unlock()
	_ = l.cfg.Hold.Release(ctx)
}

// nextRenewal is when to renew after one at from: a period later, on the
// batch grid where renewals are batched (align). Callers hold l.mu, or
// own l alone.
func (l *lease) nextRenewal(from time.Time) time.Time {
	if l.set.renew != nil {
		return align(from.Add(l.every), l.every)
	}
	return from.Add(l.every)
}

// renewEvery is the keep-alive period: a third of the TTL, or half the
// validity a backend grants if that is shorter (Redlock's drift, a
// session shorter than the TTL), so a renewal always comes in time.
func renewEvery(ttl, valid time.Duration) time.Duration {
	return max(min(ttl/3, valid/2), time.Millisecond)
}

// Unlock releases one hold through Hold.Release.
func (l *lease) Unlock(ctx context.Context) error {
	if l.set.closedNow() {
		return ErrClosed
	}
	return l.unlock(ctx)
}

func (l *lease) unlock(ctx context.Context) error {
	if err := l.op.lock(ctx); err != nil {
		l.releaseLater() // a renewal hangs: release once it is over
		return err
	}
	defer l.op.unlock()
	if l.Err() != nil {
		return ErrNotHeld
	}
	err := l.cfg.Hold.Release(ctx)
	switch {
	case err == nil:
		l.end(ErrNotHeld)
	case errors.Is(err, ErrNotHeld):
		l.lost("Unlock found its hold gone")
	default:
		l.releaseLater()
	}
	return err
}

// releaseLater follows an Unlock whose Release failed (the backend out of
// reach, a leader election): the owner wants the key gone, so renewals
// stop, and the release is tried again in the background until it goes
// through or the deadline passes, when the backend lets the hold lapse by
// itself. Else a caller that moved on would keep the key, renewed, forever.
func (l *lease) releaseLater() {
	l.mu.Lock()
	started := l.releasing
	l.releasing = true
	l.mu.Unlock()
	if started {
		return
	}
	l.set.spawn(func() {
		ctx, cancel := context.WithDeadline(l.set.ctx, l.Deadline())
		defer cancel()
		backoff.Retry(ctx, backoff.Policy{Min: 10 * time.Millisecond, Max: time.Second, Jitter: true}, func(ctx context.Context) bool {
			if l.op.lock(ctx) != nil {
				return true
			}
			defer l.op.unlock()
			if l.Err() != nil {
				return true
			}
			switch err := l.cfg.Hold.Release(ctx); {
			case err == nil, errors.Is(err, ErrNotHeld):
				l.end(ErrNotHeld) // a release whose reply was lost may have gone through
				return true
			}
			return false
		})
	})
}

// end records the lease's final state once and closes Done.
func (l *lease) end(err error) bool { return l.endIf(err, nil, "") }

// lost ends the lease as lost (ErrLeaseLost) for the reason why.
func (l *lease) lost(why string) { l.endIf(ErrLeaseLost, nil, why) }

// endIf is end, if cond (checked under l.mu) holds. A lease lost for a
// reason (why) is logged (WithLogger) before Done closes.
func (l *lease) endIf(err error, cond func() bool, why string) bool {
	l.mu.Lock()
	if l.err != nil || (cond != nil && !cond()) {
		l.mu.Unlock()
		return false
	}
	l.err = err
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.sched != 0 {
		l.set.renew.drop(l, l.sched)
		l.sched = 0
	}
	if l.stopLost != nil {
		l.stopLost()
	}
	l.mu.Unlock()
	if lg := l.set.log; lg != nil && why != "" {
		lg.Warn("locker: lease lost", "key", l.cfg.Key, "fence", l.cfg.Fence, "why", why)
	}
	close(l.done)
	l.set.remove(l)
	return true
}

// wakeIn is how long until the timer must act: the next renewal with
// keep-alive, else the deadline. Callers hold l.mu.
func (l *lease) wakeIn() time.Duration {
	wake := l.deadline
	if l.set.renew == nil && l.cfg.KeepAlive && !l.renewing && !l.releasing && l.next.Before(wake) {
		wake = l.next
	}
	return time.Until(wake)
}

// rearm resets the timer for the current next/deadline. Callers hold l.mu.
func (l *lease) rearm() {
	if l.err == nil && l.timer != nil {
		l.timer.Reset(l.wakeIn())
	}
	l.scheduleLocked()
}

// onTimer ends the lease as lost once its deadline passes without a
// successful renewal and, while keep-alive is on, starts a renewal every
// TTL/3. The renewal runs beside the timer, so that a backend that hangs
// without an answer cannot keep Done open past the deadline.
func (l *lease) onTimer() {
	// One callback at a time; a fire that comes while another runs waits
	// for it and then looks at the state afresh, so none is lost.
	l.tick.Lock()
	defer l.tick.Unlock()
	if l.Err() != nil {
		return
	}
	now := time.Now()
	if !now.Before(l.Deadline()) {
		l.expire()
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.set.renew == nil && l.cfg.KeepAlive && !l.renewing && !l.releasing && !now.Before(l.next) {
		l.renewing = true
		go l.renew()
	}
	l.rearm()
}

// scheduleLocked puts l's next renewal on its renewer's schedule, where
// renewals are batched and keep-alive is on. Callers hold l.mu.
func (l *lease) scheduleLocked() {
	r := l.set.renew
	if r == nil || !l.cfg.KeepAlive || l.renewing || l.releasing || l.err != nil {
		return
	}
	if at := monoAt(l.next); at != l.sched {
		l.sched = r.schedule(l, l.sched, at, int64(l.every/4))
		l.next = atMono(l.sched)
	}
}

// startRenewal begins the renewal due at tick at, unless that is no longer
// l's tick (it was moved, by a Refresh say) or l cannot be renewed now.
func (l *lease) startRenewal(at int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sched != at || l.err != nil || l.renewing || l.releasing {
		return false
	}
	l.sched, l.renewing = 0, true
	return true
}

// renew makes one keep-alive renewal.
func (l *lease) renew() {
	// Under the set's context, so that Close need not wait out a renewal
	// stuck on a backend that does not answer.
	ctx, cancel := context.WithDeadline(l.set.ctx, l.Deadline())
	err := l.refresh(ctx)
	cancel()
	l.renewed(err)
}

// renewed ends a keep-alive renewal, alone or in a batch, with its outcome.
func (l *lease) renewed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.renewing = false
	switch {
	case errors.Is(err, ErrNotHeld):
		return // the lease has ended
	case err == nil:
		l.next = l.nextRenewal(time.Now())
	default:
		// A failed renewal is retried, a little sooner each time, until
		// the deadline; the backend may be back before then.
		l.next = time.Now().Add(min(l.every, max(time.Until(l.deadline)/4, 10*time.Millisecond)))
		if lg := l.set.log; lg != nil {
			lg.Info("locker: renewal failed; retrying before the deadline", "key", l.cfg.Key, "fence", l.cfg.Fence,
				"error", err, "retry", time.Until(l.next).Round(time.Millisecond), "deadline", l.deadline)
		}
	}
	l.rearm()
}

// expire ends the lease as lost at its deadline, and tells a driver whose
// backend keeps the hold beyond it (driver.Expirer), after any backend
// call under way.
func (l *lease) expire() {
	e, _ := l.cfg.Hold.(driver.Expirer)
	var run func(func())
	if e != nil {
		// Taken before Done closes, so that a Close that follows Done
		// waits for Expire before it closes the driver.
		run = l.set.reserve()
	}
	if !l.endIf(ErrLeaseLost, func() bool { return !time.Now().Before(l.deadline) }, "its deadline passed without a renewal") {
		if run != nil {
			run(nil)
		}
		l.mu.Lock()
		l.rearm() // a refresh moved the deadline meanwhile
		l.mu.Unlock()
		return
	}
	if run != nil {
		run(func() {
			ctx, cancel := context.WithTimeout(context.Background(), l.cfg.TTL)
			defer cancel()
			if l.op.lock(ctx) != nil {
				return
			}
			defer l.op.unlock()
			e.Expire(ctx)
		})
	}
}
