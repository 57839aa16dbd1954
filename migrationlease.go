package locker

import (
	"context"
	"errors"
	"sync"
	"time"
)

// migrationLease is a key held on both sides of a Migration: from's lease
// a and to's lease b.
type migrationLease struct {
	a, b Lease
	done chan struct{}

	mu       sync.Mutex
	unlocked bool  // Unlock was called before either side ended
	err      error // once done
}

// newMigrationLease watches a and b: when either ends, the lease is done,
// and the other is released (unless Unlock is doing it).
func newMigrationLease(a, b Lease) *migrationLease {
	l := &migrationLease{a: a, b: b, done: make(chan struct{})}
	go l.watch()
	return l
}

// watch closes Done as the first side ends, so by that side's Deadline and
// the lease's: the other side's release, which may take closeTimeout
// against a backend that hangs, comes after. Under Unlock, it waits for
// the other side too (up to the Deadline), whose Unlock may find it lost.
func (l *migrationLease) watch() {
	first, other := l.a, l.b
	select {
	case <-l.a.Done():
	case <-l.b.Done():
		first, other = l.b, l.a
	}
	l.mu.Lock()
	unlocked := l.unlocked
	l.mu.Unlock()
	lost := !unlocked || errors.Is(first.Err(), ErrLeaseLost)
	if !lost {
		t := time.NewTimer(time.Until(l.Deadline()))
		select {
		case <-other.Done():
			lost = errors.Is(other.Err(), ErrLeaseLost)
		case <-t.C:
			lost = true // the Deadline came with the other side not let go, as a lease's would
		}
		t.Stop()
	}
	l.mu.Lock()
	l.err = ErrNotHeld
	if lost {
		l.err = ErrLeaseLost
	}
	close(l.done)
	l.mu.Unlock()
	if !unlocked {
		release(context.Background(), l.a, l.b) // the lost side answers ErrNotHeld
	}
}

func (l *migrationLease) Key() string   { return l.a.Key() }
func (l *migrationLease) Owner() string { return l.b.Owner() }

// Fence is to's: above from's, and from's later fences are above it.
func (l *migrationLease) Fence() uint64 { return l.b.Fence() }

// Deadline is the earlier of the two sides'.
func (l *migrationLease) Deadline() time.Time {
	if a, b := l.a.Deadline(), l.b.Deadline(); a.Before(b) {
		return a
	}
	return l.b.Deadline()
}

// Refresh refreshes both sides; ErrNotHeld if either is no longer ours.
func (l *migrationLease) Refresh(ctx context.Context) error {
	return errors.Join(l.b.Refresh(ctx), l.a.Refresh(ctx))
}

// Unlock releases to, then from. The error is to's, else from's.
func (l *migrationLease) Unlock(ctx context.Context) error {
	l.mu.Lock()
	select {
	case <-l.a.Done():
	case <-l.b.Done():
	default:
		l.unlocked = true
	}
	l.mu.Unlock()
	errB, errA := l.b.Unlock(ctx), l.a.Unlock(ctx)
	if errB != nil {
		return errB
	}
	return errA
}

func (l *migrationLease) Done() <-chan struct{} { return l.done }

// Err is nil while both sides hold, ErrNotHeld after Unlock, and
// ErrLeaseLost once either side ended first, as Unlock found it.
func (l *migrationLease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.err != nil:
		return l.err
	case l.a.Err() == nil && l.b.Err() == nil:
		return nil
	case l.unlocked && !errors.Is(l.a.Err(), ErrLeaseLost) && !errors.Is(l.b.Err(), ErrLeaseLost):
		return ErrNotHeld
	}
	return ErrLeaseLost
}
