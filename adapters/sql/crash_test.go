package sql_test

import (
	"testing"

	"github.com/locker-go/locker/internal/testenv"
)

// The Postgres server killed (SIGKILL) under contention and started again
// on its data, recovering from its write-ahead log: no two holders at
// once, no fence going back (the sequence is logged ahead of its use), and
// the waiters go on once it serves again.
func TestPostgresKilledAndRestartedUnderContention(t *testing.T) {
	testenv.URL(t, "LOCKER_TEST_POSTGRES") // -short skips; the server is our own
	pg := testenv.StartPostgres(t)
	testenv.KillUnderContention(t, pg.URL(), pg.Restart)
}

// MariaDB killed (SIGKILL) under contention and started again on its data
// (innodb_flush_log_at_trx_commit=1), recovering from its redo log: no two
// holders at once, no fence going back, and the waiters go on.
func TestMySQLKilledAndRestartedUnderContention(t *testing.T) {
	testenv.URL(t, "LOCKER_TEST_MYSQL") // -short skips; the server is our own
	db := testenv.StartMariaDB(t)
	testenv.KillUnderContention(t, db.URL(), db.Restart)
}
