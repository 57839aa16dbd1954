package conformance

import (
	"context"
	"errors"

	"github.com/locker-go/locker"
)

// The checks of locker.Do on the Locker: it holds the key while fn runs,
// gives fn the lease (LeaseFrom), returns fn's error, and ends fn's
// context when the lease is lost, then says so whatever fn returned.

func checkDo(e *env) error {
	key := e.prefix + "k"
	a, b, err := e.two()
	if err != nil {
		return err
	}
	boom := errors.New("boom")
	err = locker.Do(e.ctx, a, key, func(ctx context.Context) error {
		if _, err := b.TryLock(ctx, key); !errors.Is(err, locker.ErrLocked) {
			e.errorf("TryLock inside Do = %v, want ErrLocked", err)
		}
		if lease, ok := locker.LeaseFrom(ctx); !ok || lease.Key() != key || lease.Err() != nil {
			e.errorf("LeaseFrom inside Do = %v, %v; want the held lease", lease, ok)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		e.errorf("Do = %v, want fn's error", err)
	}
	return e.tryUnlock(b, key) // Do unlocked
}

func checkDoLeaseLost(e *env) error {
	key := e.prefix + "k"
	a, err := e.client()
	if err != nil {
		return err
	}
	err = locker.Do(e.ctx, a, key, func(ctx context.Context) error {
		<-ctx.Done() // the lease lapses: no keep-alive
		if cause := context.Cause(ctx); !errors.Is(cause, locker.ErrLeaseLost) {
			e.errorf("fn's ctx ended with %v, want ErrLeaseLost", cause)
		}
		return ctx.Err() // as work that stops with its context does
	}, locker.WithTTL(e.h.ttl()), locker.WithKeepAlive(false))
	if !errors.Is(err, locker.ErrLeaseLost) || !errors.Is(err, context.Canceled) {
		e.errorf("Do after the lease lapsed = %w, want ErrLeaseLost with fn's error", err) // %w: a caller can tell a refused TTL (ErrInvalidTTL)
	}
	return nil
}
