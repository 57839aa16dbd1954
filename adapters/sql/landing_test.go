package sql

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/locker-go/locker/driver"
)

// An attempt's statement on its way when its caller gives up is answered
// before the attempt returns (landing): the server has applied it by
// then, and the call's Abandon, which comes after, undoes it. Cut off at
// once, it could land after the undo, a place keeping every other waiter
// out until it lapsed. A backend that answers not even within the grace
// is cut off, the attempt's outcome unknown (mayHold); a statement begun
// after the caller gave up gets no grace; and a hold that came as the
// caller gave up is the call's to give back, with ctx's error.
func TestAttemptLandsAfterTheCallerGivesUp(t *testing.T) {
	_, d := handoffOn(t, "LOCKER_TEST_POSTGRES")
	type outcome struct {
		g              driver.Grant
		c              *call
		err            error
		doneAtStart    bool // the caller had given up as the statement began
		doneAtAnswer   bool // ... as it was answered
		statementError error
	}
	// attempt runs an attempt whose statement sleeps sleep seconds, the
	// caller giving up as it goes (or before, if early); granted: the
	// statement's answer is a hold.
	attempt := func(sleep string, early, granted bool) outcome {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var o outcome
		started := make(chan struct{})
		slow := func(sctx context.Context, d *sqlDriver, _ *driver.Request) (driver.Grant, error) {
			o.doneAtStart = ctx.Err() != nil
			close(started)
			_, o.statementError = d.db.ExecContext(sctx, "SELECT pg_sleep("+sleep+")")
			o.doneAtAnswer = ctx.Err() != nil
			if granted {
				return driver.Grant{Hold: &hold{}, Fence: 1}, o.statementError
			}
			return driver.Grant{Retry: time.Second}, o.statementError
		}
		if early {
			cancel()
		} else {
			go func() { <-started; cancel() }() // the caller gives up as the statement goes
		}
		r := &driver.Request{Key: "landing-" + rand.Text(), ID: rand.Text(), TTL: time.Minute}
		o.g, o.err = d.attempt(ctx, r, callOf(r), slow)
		o.c = callOf(r)
		return o
	}
	d.grace = time.Minute // far beyond the statement's 0.3 s
	if o := attempt("0.3", false, false); o.err != nil || o.g.Retry != time.Second || o.c.mayHold || !o.doneAtAnswer {
		t.Fatalf("a statement answered within the grace: attempt = %+v, %v (mayHold %v, the caller gone at its answer: %v); want its answer",
			o.g, o.err, o.c.mayHold, o.doneAtAnswer)
	}
	if o := attempt("0.3", false, true); !errors.Is(o.err, context.Canceled) || o.g.Hold != nil || !o.c.mayHold {
		t.Fatalf("a hold that came after the caller gave up: attempt = %+v, %v (mayHold %v); want ctx's error, the hold for Abandon",
			o.g, o.err, o.c.mayHold)
	}
	if o := attempt("5", true, false); !o.doneAtStart || o.statementError == nil || !errors.Is(o.err, context.Canceled) {
		t.Fatalf("a statement begun after the caller gave up: %v, attempt = %v; want it cut off at once", o.statementError, o.err)
	}
	d.grace = 50 * time.Millisecond
	if o := attempt("5", false, false); !errors.Is(o.err, context.Canceled) || !o.c.mayHold {
		t.Fatalf("a statement unanswered past the grace: attempt = %v (mayHold %v); want it cut off, its outcome unknown", o.err, o.c.mayHold)
	}
}
