package sql

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/locker-go/locker/driver"
)

// An attempt's statement in flight when its caller gives up is answered
// before the attempt returns (landing): the server has applied it by
// then, and the call's Abandon, which comes after, undoes it. Cut off at
// once, it could land after the undo, a place keeping every other waiter
// out until it lapsed. A backend that answers not even within the grace
// is cut off, the attempt's outcome unknown (mayHold).
func TestAttemptLandsAfterTheCallerGivesUp(t *testing.T) {
	_, d := handoffOn(t, "LOCKER_TEST_POSTGRES")
	attempt := func(sleep string) (driver.Grant, *call, error) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		started := make(chan struct{})
		slow := func(ctx context.Context, d *sqlDriver, _ *driver.Request) (driver.Grant, error) {
			close(started)
			_, err := d.db.ExecContext(ctx, "SELECT pg_sleep("+sleep+")")
			return driver.Grant{Retry: time.Second}, err
		}
		go func() { <-started; cancel() }() // the caller gives up as the statement goes
		r := &driver.Request{Key: "landing-" + rand.Text(), ID: rand.Text(), TTL: time.Minute}
		g, err := d.attempt(ctx, r, callOf(r), slow)
		return g, callOf(r), err
	}
	g, c, err := attempt("0.3")
	if err != nil || g.Retry != time.Second || c.mayHold {
		t.Fatalf("a statement answered within the grace: attempt = %+v, %v (mayHold %v); want its answer", g, err, c.mayHold)
	}
	defer func(was time.Duration) { landingGrace = was }(landingGrace)
	landingGrace = 50 * time.Millisecond
	if _, c, err := attempt("5"); !errors.Is(err, context.Canceled) || !c.mayHold {
		t.Fatalf("a statement unanswered past the grace: attempt = %v (mayHold %v); want it cut off, its outcome unknown", err, c.mayHold)
	}
}
