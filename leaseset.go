package locker

import (
	"context"
	"log/slog"
	"sync"
)

// leaseSet tracks the live leases of one Locker, for Close.
type leaseSet struct {
	calls  sync.WaitGroup // Lock, TryLock and admin calls under way, which Close waits for
	bg     sync.WaitGroup // a lease's background backend calls (giveUp, Expire)
	mu     sync.Mutex
	closed bool
	sealed bool // Close is past its releases: no new background call
	leases map[*lease]struct{}
	ctx    context.Context
	cancel context.CancelCauseFunc
	renew  *renewer     // nil: each lease renews alone (no driver.BatchRefresher)
	log    *slog.Logger // rare events (WithLogger); nil: none
}

// newLeaseSet returns an empty, open leaseSet.
func newLeaseSet() *leaseSet {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &leaseSet{leases: map[*lease]struct{}{}, ctx: ctx, cancel: cancel}
}

func (s *leaseSet) add(l *lease) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.leases[l] = struct{}{}
	return true
}

func (s *leaseSet) remove(l *lease) {
	s.mu.Lock()
	delete(s.leases, l)
	s.mu.Unlock()
}

// enter starts a call (Lock, TryLock, an admin call): ErrClosed once
// Close was called; else the call's context, which Close also cancels
// (cause ErrClosed), and end, which the caller must call when the call
// returns: Close waits for calls under way, so that their clean-up
// (leaving a queue, undoing a late grant) runs before the driver closes.
func (s *leaseSet) enter(ctx context.Context) (context.Context, func(), error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ctx, nil, ErrClosed
	}
	s.calls.Add(1)
	s.mu.Unlock()
	ctx, stop := s.context(ctx)
	return ctx, func() { stop(); s.calls.Done() }, nil
}

// begin is enter for a Lock or TryLock call, with its resolved options,
// or why they are bad: either way nothing has reached the backend yet.
func (s *leaseSet) begin(ctx context.Context, key string, opts []Option) (context.Context, Options, func(), error) {
	ctx, end, err := s.enter(ctx)
	if err != nil {
		return ctx, Options{}, nil, err
	}
	o, err := Resolve(key, opts...)
	if err != nil {
		end()
		return ctx, Options{}, nil, err
	}
	return ctx, o, end, nil
}

// closedNow reports whether Close was called.
func (s *leaseSet) closedNow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// context returns a context derived from ctx that is also cancelled, with
// cause ErrClosed, when the Set closes: Lock calls wait under it, so Close
// ends them. Call stop when done to release it.
func (s *leaseSet) context(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(ErrClosed) })
	return ctx, func() { stop(); cancel(nil) }
}

// close marks the set closed, ends waiting Lock calls, and unlocks every
// live lease best-effort within ctx. It returns ErrClosed if already closed.
func (s *leaseSet) close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	leases := make([]*lease, 0, len(s.leases))
	for l := range s.leases {
		leases = append(leases, l)
	}
	s.mu.Unlock()
	s.cancel(ErrClosed)
	s.calls.Wait() // they end promptly: their contexts were just cancelled
	var wg sync.WaitGroup
	for _, l := range leases {
		wg.Go(func() {
			_ = l.unlock(ctx)
			l.end(ErrNotHeld) // given up even if the release failed
		})
	}
	wg.Wait()
	s.mu.Lock()
	s.sealed = true
	s.mu.Unlock()
	bgDone := make(chan struct{})
	go func() { s.bg.Wait(); close(bgDone) }()
	select {
	case <-bgDone:
	case <-ctx.Done():
	}
	return nil
}

// spawn runs f in the background unless Close is past its releases;
// Close waits for it (within its bound) before closing the driver.
func (s *leaseSet) spawn(f func()) {
	if run := s.reserve(); run != nil {
		run(f)
	}
}

// reserve takes a background slot now, for work decided on later: Close,
// once past its releases, waits for it. It returns nil if Close is past
// them already. The caller must call run once, with nil to give the slot
// back unused.
func (s *leaseSet) reserve() (run func(f func())) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed {
		return nil
	}
	s.bg.Add(1)
	return func(f func()) {
		if f == nil {
			s.bg.Done()
			return
		}
		go func() { defer s.bg.Done(); f() }()
	}
}
