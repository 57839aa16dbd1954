package sql

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/locker-go/locker/internal/testenv"
)

// Postgres's LISTEN connection wakes every waiter when it comes back after
// a drop (releases meanwhile were not heard), and none when it first comes
// up: each waiter's Subscribe waited for it, so none has missed anything.
// (CI saw the spurious first wake: a Limited waiter beyond its run woken.)
func TestListenerWakesAllOnlyAfterADrop(t *testing.T) {
	raw, app := WithApp(testenv.URL(t, "LOCKER_TEST_POSTGRES"), "locker-listen-")
	l := openLimit(t, raw)
	d, ctx := driverOf(l), t.Context()
	sub := func(token string) <-chan struct{} {
		wake, stop, err := d.hub.Subscribe(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		return wake
	}
	await := func(wake <-chan struct{}, what string) {
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Fatal(what)
		}
	}
	token := "listen-" + rand.Text()
	waiter := sub(token) // starts the listener; returns once it LISTENs
	// A notification heard means the listener is past whatever it does on
	// coming up.
	probe := sub(token + "-probe")
	if _, err := d.db.ExecContext(ctx, `SELECT pg_notify($1, $2)`, d.cfg.table, token+"-probe"); err != nil {
		t.Fatal(err)
	}
	await(probe, "the probe's notification not heard")
	select {
	case <-waiter:
		t.Error("the listener's first connection woke a waiter")
	default:
	}
	var cut int
	if err := d.db.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name = $1 AND query LIKE 'LISTEN %'`, app).Scan(&cut); err != nil || cut != 1 {
		t.Fatalf("terminating the LISTEN connection: %d terminated, %v", cut, err)
	}
	await(waiter, "the waiter not woken when the LISTEN connection came back")
}
