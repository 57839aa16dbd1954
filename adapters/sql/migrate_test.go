package sql

import (
	"context"
	dbsql "database/sql"
	"testing"
	"time"

	"github.com/locker-go/locker/internal/testenv"
)

// Opening a Locker on an up-to-date schema takes no lock that waits for
// the lock table's readers: an ALTER TABLE … ADD COLUMN IF NOT EXISTS
// took ACCESS EXCLUSIVE even when the column was there, so a Locker
// opening while others locked deadlocked with them (Postgres then failed
// one: "deadlock detected"). Here a transaction reads the tables, and
// the Open must not wait for it.
func TestOpenBesideReaders(t *testing.T) {
	t.Parallel()
	raw := testenv.URL(t, "LOCKER_TEST_POSTGRES").String()
	first, err := Open(context.Background(), raw) // the schema is there
	if err != nil {
		t.Fatal(err)
	}
	_ = first.Close()
	db, err := dbsql.Open("pgx", raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`LOCK TABLE locker_locks, locker_locks_queue, locker_locks_hold IN ACCESS SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	l, err := Open(ctx, raw)
	if err != nil {
		t.Fatalf("Open beside a reader of the lock tables: %v", err)
	}
	_ = l.Close()
}

// Lockers opening at once on MySQL all open, on tables that do not exist
// yet and on tables made by an earlier version: MySQL's DDL does not wait
// for the transaction that looked for a missing column, so two of them
// could both add it, and the second was refused (1060, duplicate column
// name; CI saw it as a List's ErrUnavailable when two tests first used
// the Subtree space at once, whose new queue table lacked mode).
func TestMySQLOpensAtOnce(t *testing.T) {
	t.Parallel()
	raw := testenv.URL(t, "LOCKER_TEST_MYSQL").String() + "?table=open_race"
	first, err := Open(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	db := driverOf(first).db
	t.Cleanup(func() { _ = first.Close() })
	alter := func(stmts ...string) {
		t.Helper()
		for _, s := range stmts {
			if _, err := db.ExecContext(t.Context(), s); err != nil {
				t.Fatal(err)
			}
		}
	}
	alter("DROP TABLE open_race, open_race_fence, open_race_queue, open_race_hold, open_race_park")
	openAtOnce(t, raw, "on new tables")
	alter("ALTER TABLE open_race_queue DROP COLUMN mode, DROP COLUMN lim, DROP COLUMN proc, DROP COLUMN owner, DROP COLUMN ttl, DROP INDEX key_seq",
		"ALTER TABLE open_race_hold DROP COLUMN lim", "ALTER TABLE open_race DROP COLUMN parked")
	openAtOnce(t, raw, "on old tables")
	var cols, indexes int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM information_schema.columns "+
		"WHERE table_schema = DATABASE() AND table_name IN ('open_race_queue', 'open_race_hold', 'open_race') "+
		"AND column_name IN ('mode', 'lim', 'proc', 'parked', 'owner', 'ttl')").Scan(&cols); err != nil {
		t.Fatal(err)
	}
	if cols != 10 { // the queue's mode, lim, proc, owner and ttl, the holders' owner, mode and lim, the lock table's owner and parked
		t.Fatalf("%d of the 10 columns expected after the Opens", cols)
	}
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(DISTINCT index_name) FROM information_schema.statistics "+
		"WHERE table_schema = DATABASE() AND table_name = 'open_race_queue' AND index_name = 'key_seq'").Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	if indexes != 1 {
		t.Fatal("the queue's index by key and seq was not added after the Opens")
	}
}

// openAtOnce opens 8 Lockers on raw at once, and fails t unless each opens.
func openAtOnce(t *testing.T, raw, what string) {
	t.Helper()
	const n = 8
	start, errs := make(chan struct{}), make(chan error, n)
	for range n {
		go func() {
			<-start
			l, err := Open(t.Context(), raw)
			if err == nil {
				err = l.Close()
			}
			errs <- err
		}()
	}
	close(start)
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("Open beside %d others %s: %v", n-1, what, err)
		}
	}
}
