package locker

import (
	"context"
	"errors"
	"fmt"
)

// Migration returns a Locker that holds each key on both from and to: the
// middle phase of a move between backends with no window where two
// processes both hold a key. (1) Every process locks on from; (2) they move,
// one by one, to Migration(from, to), whose leases exclude the processes
// still on from through from; (3) once none is left on from alone, they
// move, one by one, to to, where the migrating leases exclude them.
//
// A lease holds the key on from, then on to, and its Fence is to's, which
// to keeps above from's (WithFenceFloor); from is then raised above it
// (FenceRaiser), so a key's fences keep rising through all three phases,
// whatever the two backends' own counters were. Both sides must keep
// fence floors: over a Locker that cannot, Lock and TryLock answer an
// error matching errors.ErrUnsupported and take nothing.
//
// Done closes when either side's lease ends, so by the earlier Deadline
// (the other side is released after, in the background); Unlock releases
// to, then from. Lock never holds one side while it waits
// for the other longer than one attempt. Options apply to both sides;
// LockAll locks key by key. Close closes both Lockers.
func Migration(from, to Locker) Locker { return &migration{from: from, to: to} }

type migration struct{ from, to Locker }

func (m *migration) TryLock(ctx context.Context, key string, opts ...Option) (Lease, error) {
	if err := m.check(ctx, key, opts); err != nil {
		return nil, err
	}
	a, err := m.from.TryLock(ctx, key, opts...)
	if err != nil {
		return nil, err
	}
	return m.join(ctx, key, a, opts)
}

// Lock takes from (waiting), then makes one attempt at to. Refused there,
// it lets from go and waits for to, then makes one attempt at from while
// holding to; and so on until both are held.
func (m *migration) Lock(ctx context.Context, key string, opts ...Option) (Lease, error) {
	if err := m.check(ctx, key, opts); err != nil {
		return nil, err
	}
	for {
		a, err := m.from.Lock(ctx, key, opts...)
		if err != nil {
			return nil, err
		}
		l, err := m.join(ctx, key, a, opts)
		if !errors.Is(err, ErrLocked) {
			return l, err
		}
		b, err := m.to.Lock(ctx, key, floor(opts, a.Fence())...)
		if err != nil {
			return nil, err
		}
		if a, err = m.from.TryLock(ctx, key, opts...); err == nil && a.Fence() < b.Fence() {
			if err = m.raise(ctx, key, b.Fence(), opts); err == nil {
				return newMigrationLease(a, b), nil
			}
		}
		release(ctx, a, b) // from refused, or its fence above to's: again
		if err != nil && !errors.Is(err, ErrLocked) {
			return nil, err
		}
	}
}

// check answers ErrUnsupported, before anything is taken, if from cannot
// keep fence floors (to's is checked by its own Lock, WithFenceFloor).
func (m *migration) check(ctx context.Context, key string, opts []Option) error {
	r, ok := m.from.(FenceRaiser)
	if !ok {
		return fmt.Errorf("locker: migration from %T: fence floors: %w", m.from, errors.ErrUnsupported)
	}
	return r.RaiseFence(ctx, key, 0, opts...) // 0: checks, changes nothing
}

// join makes one attempt at to for a, held on from: a lease on both, or
// a's release and the attempt's error (ErrLocked if refused).
func (m *migration) join(ctx context.Context, key string, a Lease, opts []Option) (Lease, error) {
	b, err := m.to.TryLock(ctx, key, floor(opts, a.Fence())...)
	if err == nil {
		if err = m.raise(ctx, key, b.Fence(), opts); err == nil {
			return newMigrationLease(a, b), nil
		}
	}
	release(ctx, a, b)
	return nil, err
}

// raise keeps from's later fences of key above to's fence f.
func (m *migration) raise(ctx context.Context, key string, f uint64, opts []Option) error {
	return m.from.(FenceRaiser).RaiseFence(ctx, key, f, opts...)
}

// RaiseFence raises key's fences on both sides.
func (m *migration) RaiseFence(ctx context.Context, key string, f uint64, opts ...Option) error {
	for _, l := range []Locker{m.to, m.from} {
		r, ok := l.(FenceRaiser)
		if !ok {
			return fmt.Errorf("locker: %T: fence floors: %w", l, errors.ErrUnsupported)
		}
		if err := r.RaiseFence(ctx, key, f, opts...); err != nil {
			return err
		}
	}
	return nil
}

// Close closes to and from.
func (m *migration) Close() error { return errors.Join(m.to.Close(), m.from.Close()) }

// floor is opts asking for a fence above f (and above any floor in opts).
func floor(opts []Option, f uint64) []Option {
	return append(opts[:len(opts):len(opts)], func(o *Options) { o.FenceFloor = max(o.FenceFloor, f) })
}

// release unlocks the leases that are not nil, best effort, under a fresh
// bounded context (ctx may have ended).
func release(ctx context.Context, ls ...Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	for _, l := range ls {
		if l != nil {
			_ = l.Unlock(rctx)
		}
	}
}
