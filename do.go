package locker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Do locks key, runs fn with a context that is cancelled (cause
// ErrLeaseLost) if the lease is lost, and unlocks. fn finds the lease with
// LeaseFrom, e.g. to pass its Fence on. Do returns the Lock error; else, if
// the lease ended before fn returned, an error matching ErrLeaseLost (and
// fn's error, if any), since fn's work was then not protected to its end;
// else fn's error; else the Unlock error.
func Do(ctx context.Context, l Locker, key string, fn func(ctx context.Context) error, opts ...Option) error {
	lease, err := l.Lock(ctx, key, opts...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(context.WithValue(ctx, leaseKey{}, lease))
	stop := context.AfterFunc(leaseContext(lease), func() { cancel(ErrLeaseLost) })
	err = fn(fctx)
	lost := ended(lease) // before Unlock, which ends it too
	stop()
	cancel(nil)
	// Unlock even when ctx has ended: the caller still wants the key freed.
	uerr := lease.Unlock(context.WithoutCancel(ctx))
	switch {
	case lost && err != nil:
		return fmt.Errorf("%w: %q ended before fn returned: %w", ErrLeaseLost, key, err)
	case lost || errors.Is(uerr, ErrNotHeld):
		return fmt.Errorf("%w: %q ended before fn returned", ErrLeaseLost, key)
	case err != nil:
		return err
	default:
		return uerr
	}
}

// leaseKey is the context key under which Do passes fn its lease.
type leaseKey struct{}

// LeaseFrom returns the lease that Do holds for the fn it runs with ctx
// (or a context derived from it).
func LeaseFrom(ctx context.Context) (Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(Lease)
	return l, ok
}

// ended reports whether the lease is over.
func ended(l Lease) bool {
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

// leaseContext is a context that ends when the lease does.
func leaseContext(l Lease) context.Context {
	return doneContext{l.Done()}
}

type doneContext struct{ done <-chan struct{} }

func (doneContext) Deadline() (deadline time.Time, ok bool) { return }
func (c doneContext) Done() <-chan struct{}                 { return c.done }
func (c doneContext) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}
func (doneContext) Value(any) any { return nil }
