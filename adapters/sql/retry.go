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
// (see postgres release); it is transient and was not applied.
var errRace = errors.New("locker/sql: concurrent change, retrying")

// retry runs op, holding the process's gate to the database if any, and
// runs it again after transient errors, with backoff, until the caller's
// deadline or the retry timeout. It reports through *ambiguous (if not nil)
// whether a failed try may have been applied (so does a try cut short by
// the end of ctx). Errors wrap
// locker.ErrUnavailable, or ctx.Err() once ctx has ended.
func (d *sqlDriver) retry(ctx context.Context, op func(context.Context) error, ambiguous *bool) error {
	end := time.Now().Add(d.cfg.retryTimeout)
	backoff := time.Millisecond
	for {
		err := d.gated(ctx, op)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			// The failure may be the cancellation of a statement that the
			// server had already applied.
			if ambiguous != nil {
				*ambiguous = true
			}
			return fmt.Errorf("locker/sql: %w (%v)", ctx.Err(), err)
		}
		transient, amb := errors.Is(err, errRace), false
		if !transient {
			transient, amb = d.d.classify(err)
		}
		if ambiguous != nil && amb {
			*ambiguous = true
		}
		sleep := backoff/2 + rand.N(backoff/2+1) // jitter spreads contending retries
		if !transient || time.Now().Add(sleep).After(end) {
			return locker.Unavailable(err)
		}
		t := time.NewTimer(sleep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("locker/sql: %w (%v)", ctx.Err(), err)
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// gated runs op while holding the gate, if the driver has one.
func (d *sqlDriver) gated(ctx context.Context, op func(context.Context) error) error {
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
}
