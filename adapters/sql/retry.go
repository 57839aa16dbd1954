package sql

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/backoff"
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
	if ambiguous == nil {
		ambiguous = new(bool)
	}
	var err error
	p := backoff.Policy{Min: time.Millisecond, Max: 200 * time.Millisecond, Jitter: true, Until: time.Now().Add(timeout)}
	backoff.Retry(ctx, p, func(ctx context.Context) bool {
		if err = op(ctx); err == nil {
			return true
		}
		if ctx.Err() != nil {
			// The failure may be the cancellation of a statement that the
			// server had already applied.
			*ambiguous = true
			return true
		}
		transient, amb := errors.Is(err, errRace), false
		if !transient {
			transient, amb = classify(err)
		}
		*ambiguous = *ambiguous || amb
		return !transient
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("locker/sql: %w (%v)", ctx.Err(), err)
	}
	return locker.Unavailable(err)
}
