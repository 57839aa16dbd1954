// Package lease holds what every adapter's lease shares: the Deadline, the
// keep-alive loop, Done/Err bookkeeping, and the set of a Locker's live
// leases that Close releases. An adapter supplies only the backend calls.
package lease

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/locker-go/locker"
)

// Ops is what a backend does for one held lease.
type Ops interface {
	// Refresh extends the hold. It returns how long the lease is valid from
	// the moment the call began (the TTL, or less, e.g. Redlock's drift), or
	// locker.ErrNotHeld when the backend no longer has the lock for us.
	Refresh(ctx context.Context) (time.Duration, error)
	// Release drops one hold; locker.ErrNotHeld when it was not ours.
	Release(ctx context.Context) error
}

// Expirer is implemented by Ops whose backend does not end the lock by
// itself when the deadline passes (a ZooKeeper node lives as long as its
// session). Expire is called once, in its own goroutine, when a lease ends
// lost while the backend may still hold it.
type Expirer interface {
	Expire(ctx context.Context)
}

// Config describes a newly acquired lease.
type Config struct {
	Key, Owner string
	Fence      uint64
	TTL        time.Duration
	KeepAlive  bool
	// Start is when the acquiring call began; the first deadline is
	// Start+Validity, so time spent acquiring counts against the lease.
	Start    time.Time
	Validity time.Duration // defaults to TTL
	Ops      Ops
}

// Lease implements locker.Lease over Ops.
type Lease struct {
	cfg  Config
	set  *Set
	done chan struct{}
	tick sync.Mutex // one timer callback at a time

	// opMu orders a lease's backend calls: one Release however many Unlock
	// calls race, and no renewal overlapping it, so a renewal that finds
	// the lock gone after our own Unlock cannot call the lease lost.
	opMu sync.Mutex

	mu       sync.Mutex
	deadline time.Time
	next     time.Time     // next renewal, with keep-alive
	every    time.Duration // renewal period: TTL/3, or less if the validity is short
	timer    *time.Timer   // wakes onTimer at min(next, deadline)
	err      error
}

// New starts a lease and adds it to set, whose Close will release it. If
// set is already closed, the hold is released and New returns ErrClosed.
func New(set *Set, cfg Config) (*Lease, error) {
	if cfg.Validity <= 0 {
		cfg.Validity = cfg.TTL
	}
	l := &Lease{
		cfg:      cfg,
		set:      set,
		done:     make(chan struct{}),
		deadline: cfg.Start.Add(cfg.Validity),
	}
	l.every = renewEvery(cfg.TTL, cfg.Validity)
	l.next = cfg.Start.Add(l.every)
	if !set.add(l) {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.TTL)
		defer cancel()
		_ = cfg.Ops.Release(ctx)
		return nil, locker.ErrClosed
	}
	// A timer, not a goroutine: a lease unlocked before its first renewal
	// never costs a goroutine or a wake-up.
	l.mu.Lock()
	l.timer = time.AfterFunc(l.wakeIn(), l.onTimer)
	l.mu.Unlock()
	return l, nil
}

func (l *Lease) Key() string           { return l.cfg.Key }
func (l *Lease) Owner() string         { return l.cfg.Owner }
func (l *Lease) Fence() uint64         { return l.cfg.Fence }
func (l *Lease) Done() <-chan struct{} { return l.done }

func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Refresh extends the lease through Ops.Refresh.
func (l *Lease) Refresh(ctx context.Context) error {
	if l.set.Closed() {
		return locker.ErrClosed
	}
	if err := l.refresh(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	l.next = time.Now().Add(l.every)
	l.rearm()
	l.mu.Unlock()
	return nil
}

func (l *Lease) refresh(ctx context.Context) error {
	l.opMu.Lock()
	defer l.opMu.Unlock()
	if l.Err() != nil {
		return locker.ErrNotHeld
	}
	start := time.Now()
	valid, err := l.cfg.Ops.Refresh(ctx)
	if errors.Is(err, locker.ErrNotHeld) {
		l.end(locker.ErrLeaseLost)
		return locker.ErrNotHeld
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil { // it ended at its deadline while we were renewing
		return locker.ErrNotHeld
	}
	if d := start.Add(valid); d.After(l.deadline) {
		l.deadline = d
	}
	l.every = renewEvery(l.cfg.TTL, valid)
	return nil
}

// renewEvery is the keep-alive period: a third of the TTL, or half the
// validity a backend grants if that is shorter (Redlock's drift, a
// session shorter than the TTL), so a renewal always comes in time.
func renewEvery(ttl, valid time.Duration) time.Duration {
	return max(min(ttl/3, valid/2), time.Millisecond)
}

// Unlock releases one hold through Ops.Release.
func (l *Lease) Unlock(ctx context.Context) error {
	if l.set.Closed() {
		return locker.ErrClosed
	}
	return l.unlock(ctx)
}

func (l *Lease) unlock(ctx context.Context) error {
	l.opMu.Lock()
	defer l.opMu.Unlock()
	if l.Err() != nil {
		return locker.ErrNotHeld
	}
	err := l.cfg.Ops.Release(ctx)
	switch {
	case err == nil:
		l.end(locker.ErrNotHeld)
	case errors.Is(err, locker.ErrNotHeld):
		l.end(locker.ErrLeaseLost)
	}
	return err
}

// Lose ends the lease with ErrLeaseLost: adapters call it when the backend
// says the lock is gone (session expired, lease revoked, node deleted).
func (l *Lease) Lose() { l.end(locker.ErrLeaseLost) }

// end records the lease's final state once and closes Done.
func (l *Lease) end(err error) bool {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return false
	}
	l.err = err
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
	close(l.done)
	l.set.remove(l)
	return true
}

// wakeIn is how long until the timer must act: the next renewal with
// keep-alive, else the deadline. Callers hold l.mu.
func (l *Lease) wakeIn() time.Duration {
	wake := l.deadline
	if l.cfg.KeepAlive && l.next.Before(wake) {
		wake = l.next
	}
	return time.Until(wake)
}

// rearm resets the timer for the current next/deadline. Callers hold l.mu.
func (l *Lease) rearm() {
	if l.err == nil && l.timer != nil {
		l.timer.Reset(l.wakeIn())
	}
}

// onTimer renews the lease every TTL/3 while keep-alive is on, and ends it
// as lost once its deadline passes without a successful renewal.
func (l *Lease) onTimer() {
	// One callback at a time; a fire that comes while another runs waits
	// for it and then looks at the state afresh, so none is lost.
	l.tick.Lock()
	defer l.tick.Unlock()
	if l.Err() != nil {
		return
	}
	l.mu.Lock()
	renew := l.cfg.KeepAlive && !time.Now().Before(l.next)
	l.mu.Unlock()
	if renew {
		// Under the set's context, so that Close need not wait out a
		// renewal stuck on a backend that does not answer.
		ctx, cancel := context.WithDeadline(l.set.ctx, l.Deadline())
		err := l.refresh(ctx)
		cancel()
		if errors.Is(err, locker.ErrNotHeld) {
			return // refresh ended the lease
		}
		l.mu.Lock()
		if err == nil {
			l.next = time.Now().Add(l.every)
		} else {
			// A failed renewal is retried, a little sooner each time, until
			// the deadline; the backend may be back before then.
			l.next = time.Now().Add(min(l.every, max(time.Until(l.deadline)/4, 10*time.Millisecond)))
		}
		l.mu.Unlock()
	}
	if !time.Now().Before(l.Deadline()) {
		if l.end(locker.ErrLeaseLost) {
			if e, ok := l.cfg.Ops.(Expirer); ok {
				ctx, cancel := context.WithTimeout(context.Background(), l.cfg.TTL)
				e.Expire(ctx)
				cancel()
			}
		}
		return
	}
	l.mu.Lock()
	l.rearm()
	l.mu.Unlock()
}

// Set tracks the live leases of one Locker, for Close.
type Set struct {
	calls  sync.WaitGroup // Lock and TryLock calls under way, which Close waits for
	mu     sync.Mutex
	closed bool
	leases map[*Lease]struct{}
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// NewSet returns an empty, open Set.
func NewSet() *Set {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Set{leases: map[*Lease]struct{}{}, ctx: ctx, cancel: cancel}
}

func (s *Set) add(l *Lease) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.leases[l] = struct{}{}
	return true
}

func (s *Set) remove(l *Lease) {
	s.mu.Lock()
	delete(s.leases, l)
	s.mu.Unlock()
}

// Begin starts a Lock or TryLock call: ErrClosed once Close was called,
// else the resolved options, or why they are bad; either way nothing has
// reached the backend yet. On success it returns the call's context, which
// Close also cancels (cause ErrClosed), and end, which the caller must call
// when the call returns: Close waits for calls under way, so that their
// clean-up (leaving a queue, undoing a late grant) runs before the adapter
// closes its client.
func (s *Set) Begin(ctx context.Context, key string, opts []locker.Option) (context.Context, locker.Options, func(), error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ctx, locker.Options{}, nil, locker.ErrClosed
	}
	s.calls.Add(1)
	s.mu.Unlock()
	o, err := locker.Resolve(key, opts...)
	if err != nil {
		s.calls.Done()
		return ctx, locker.Options{}, nil, err
	}
	ctx, stop := s.Context(ctx)
	return ctx, o, func() { stop(); s.calls.Done() }, nil
}

// CheckKey starts an admin call on key: ErrClosed, ErrInvalidKey or nil.
func (s *Set) CheckKey(key string) error {
	if err := s.Check(); err != nil {
		return err
	}
	return locker.ValidateKey(key)
}

// Check starts any other call: ErrClosed once Close was called, else nil.
func (s *Set) Check() error {
	if s.Closed() {
		return locker.ErrClosed
	}
	return nil
}

// Closed reports whether Close was called.
func (s *Set) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Context returns a context derived from ctx that is also cancelled, with
// cause ErrClosed, when the Set closes: Lock calls wait under it, so Close
// ends them. Call stop when done to release it.
func (s *Set) Context(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(locker.ErrClosed) })
	return ctx, func() { stop(); cancel(nil) }
}

// Close marks the set closed, ends waiting Lock calls, and unlocks every
// live lease best-effort within ctx. It returns ErrClosed if already closed.
func (s *Set) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return locker.ErrClosed
	}
	s.closed = true
	leases := make([]*Lease, 0, len(s.leases))
	for l := range s.leases {
		leases = append(leases, l)
	}
	s.mu.Unlock()
	s.cancel(locker.ErrClosed)
	s.calls.Wait() // they end promptly: their contexts were just cancelled
	var wg sync.WaitGroup
	for _, l := range leases {
		wg.Go(func() {
			_ = l.unlock(ctx)
			l.end(locker.ErrNotHeld) // given up even if the release failed
		})
	}
	wg.Wait()
	return nil
}
