package peers

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/locker-go/locker"
)

// shim presents one client of a peer library as a locker.Locker, so that
// conformance.Bench drives it exactly as it drives ours. The benchmarks use
// only Lock, Lease.Unlock and Close; options are ignored (every peer is set
// up with the same 15 s TTL as our default).
type shim struct {
	// lock blocks until key is held, the peer's way, and returns its unlock.
	lock func(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	// close releases the client's connections or session.
	close func() error
}

func (s shim) Lock(ctx context.Context, key string, _ ...locker.Option) (locker.Lease, error) {
	unlock, err := s.lock(ctx, key)
	if err != nil {
		return nil, err
	}
	return &shimLease{key: key, unlock: unlock, done: make(chan struct{})}, nil
}

// TryLock is not part of the measured workload.
func (s shim) TryLock(context.Context, string, ...locker.Option) (locker.Lease, error) {
	return nil, errors.ErrUnsupported
}

func (s shim) Close() error { return s.close() }

// shimLease is a held peer lock; only Unlock reaches the peer.
type shimLease struct {
	key      string
	unlock   func(context.Context) error
	done     chan struct{}
	unlocked atomic.Bool
}

func (l *shimLease) Key() string                   { return l.key }
func (l *shimLease) Owner() string                 { return "" }
func (l *shimLease) Fence() uint64                 { return 0 }
func (l *shimLease) Deadline() time.Time           { return time.Time{} }
func (l *shimLease) Refresh(context.Context) error { return errors.ErrUnsupported }
func (l *shimLease) Done() <-chan struct{}         { return l.done }

func (l *shimLease) Unlock(ctx context.Context) error {
	if l.unlocked.Swap(true) {
		return locker.ErrNotHeld
	}
	defer close(l.done)
	return l.unlock(ctx)
}

func (l *shimLease) Err() error {
	if l.unlocked.Load() {
		return locker.ErrNotHeld
	}
	return nil
}
