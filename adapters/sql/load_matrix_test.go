package sql_test

import (
	"testing"

	"github.com/locker-go/locker/internal/testenv"
)

// The fault matrix's load run: 400 waiters on one key, then 64 clients
// over 1,000 keys, fenced counters exact, history linearizable.
func TestLoadPostgres(t *testing.T) {
	testenv.Load(t, testenv.URL(t, "LOCKER_TEST_POSTGRES").String())
}

// SQLite's load run is too slow under the race detector (the pure-Go
// driver is transpiled C: 400 handoffs take minutes), so scripts/test runs
// it in a step of its own, without -race.
func TestLoadSQLite(t *testing.T) {
	if raceBuild {
		t.Skip("SQLite's load run does not run under -race: scripts/test runs it without (go test -run TestLoadSQLite ./adapters/sql)")
	}
	testenv.Load(t, "sqlite://"+t.TempDir()+"/load.db")
}
