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
