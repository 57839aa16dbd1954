package sql

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// On Postgres a watch on an election hears, through the LISTEN
// connection, its leader's grant and resignation by another process (a
// Locker with a pool and listener of its own). MySQL and SQLite decline:
// their observers read on a timer.
func TestWatchHearsAnnouncements(t *testing.T) {
	ctx := context.Background()
	ls := dialects(t)
	for _, name := range []string{"mysql", "sqlite"} {
		if _, _, err := ls[name].sqlDriver.Watch(ctx, driver.Subtree, "e/"); !errors.Is(err, driver.ErrSkip) {
			t.Errorf("%s: Watch = %v; want driver.ErrSkip", name, err)
		}
	}
	other, err := Open(ctx, testenv.URL(t, "LOCKER_TEST_POSTGRES").String())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	election := "watch-" + rand.Text()
	changed, stop, err := ls["postgres"].sqlDriver.Watch(ctx, driver.Subtree, election+"/")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	lead, err := locker.Campaign(ctx, other, election)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Signalled(t, changed, "the leader's grant")
	if err := lead.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Signalled(t, changed, "the leader's resignation")
}
