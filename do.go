package locker

import (
	"context"
	"errors"
	"time"
)

// Do locks key, runs fn with a context that is cancelled if the lease is
// lost, and unlocks. It returns fn's error; else the Lock or Unlock error;
// else ErrLeaseLost if the lease ended before fn returned, since fn's work
// was then not protected to its end.
func Do(ctx context.Context, l Locker, key string, fn func(ctx context.Context) error, opts ...Option) error {
	lease, err := l.Lock(ctx, key, opts...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(leaseContext(lease), func() { cancel(ErrLeaseLost) })
	err = fn(fctx)
	stop()
	cancel(nil)
	// Unlock even when ctx has ended: the caller still wants the key freed.
	uerr := lease.Unlock(context.WithoutCancel(ctx))
	switch {
	case err != nil:
		return err
	case errors.Is(lease.Err(), ErrLeaseLost) || errors.Is(uerr, ErrNotHeld):
		return ErrLeaseLost
	default:
		return uerr
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
