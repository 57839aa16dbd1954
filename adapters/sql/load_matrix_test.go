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

// SQLite's load run (in-process: the pure-Go driver is transpiled C).
func TestLoadSQLite(t *testing.T) {
	testenv.Load(t, "sqlite://"+t.TempDir()+"/load.db")
}
