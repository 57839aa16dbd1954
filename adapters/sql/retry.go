package sql

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/locker-go/locker"
)

// errRace is returned by a statement that lost a race it can retry at once
// (see pgRelease); it is transient and was not applied.
var errRace = errors.New("locker/sql: concurrent change, retrying")

// retry runs op, holding the process's gate to the database if any, and
// again after the errors that d's dialect calls transient.
func (d *sqlDriver) retry(ctx context.Context, op func(context.Context) error, ambiguous *bool) error {
	return retry(ctx, d.cfg.retryTimeout, d.d.classify, func(ctx context.Context) error {
		if d.gate == nil {
			return op(ctx)
		}
		select {
		case d.gate <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-d.gate }()
		return op(ctx)
	}, ambiguous)
}

// retry runs op, and again after transient errors, with backoff, until
// ctx's deadline or timeout. It reports through *ambiguous (if not nil)
// whether a failed try may have been applied (so does a try cut short by
// the end of ctx). Errors wrap locker.ErrUnavailable, or ctx.Err() once
// ctx has ended.
func retry(ctx context.Context, timeout time.Duration, classify func(error) (transient, ambiguous bool), op func(context.Context) error, ambiguous *bool) error {
	end := time.Now().Add(timeout)
	backoff := time.Millisecond
	if ambiguous == nil {
		ambiguous = new(bool)
	}
	for {
		err := op(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			// The failure may be the cancellation of a statement that the
			// server had already applied.
			*ambiguous = true
			return fmt.Errorf("locker/sql: %w (%v)", ctx.Err(), err)
		}
		transient, amb := errors.Is(err, errRace), false
		if !transient {
			transient, amb = classify(err)
		}
		*ambiguous = *ambiguous || amb
		sleep := backoff/2 + rand.N(backoff/2+1) // jitter spreads contending retries
		if !transient || time.Now().Add(sleep).After(end) {
			return locker.Unavailable(err)
		}
		select {
		case <-time.After(sleep):
		case <-ctx.Done():
			return fmt.Errorf("locker/sql: %w (%v)", ctx.Err(), err)
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}
