package sql

import (
	dbsql "database/sql"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	gsqlite "github.com/libtnb/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/locker-go/locker"
)

// A SQLite driver keeps the statements of its dialect prepared, and runs
// them so: the modal path's in its transactions, the single-statement
// paths' (acquire, release, refresh) on its pool. Its transactions begin
// IMMEDIATE (Open's DSN), so the modal path takes no lock of its own.
func TestSQLitePreparesItsStatements(t *testing.T) {
	l, err := Open(t.Context(), "sqlite://"+filepath.ToSlash(filepath.Join(t.TempDir(), "prep.db")))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := driverOf(l)
	if d.prep == nil {
		t.Fatal("no statements prepared")
	}
	for name, q := range map[string]string{
		"state": d.mq.state.q, "enqueue": d.mq.enqueue.q, "dequeue": d.mq.dequeue.q, "draw": d.mq.draw.q,
		"addHeader": d.mq.addHeader.q, "dropHeader": d.mq.dropHeader.q, "addHolder": d.mq.addHolder.q,
		"acquire": d.q.acquire, "release": d.q.release, "refresh": d.q.refresh, "refreshBatch": d.q.refreshBatch,
	} {
		if d.prep.m[q] == nil {
			t.Errorf("%s is not prepared", name)
		}
	}
	if !d.immediate {
		t.Error("Open's transactions do not begin IMMEDIATE")
	}
	// Shared holds take the modal path, each call in a transaction.
	for range 3 {
		lease, err := l.Lock(t.Context(), "k", locker.Shared(), locker.WithKeepAlive(false))
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := d.db.BeginTx(t.Context(), d.txOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, ok := d.prep.in(tx).(preparedQuerier); !ok {
		t.Fatal("a transaction runs its statements unprepared")
	}
	if _, ok := d.pool().(preparedQuerier); !ok {
		t.Fatal("the pool runs its statements unprepared")
	}
	_ = tx.Rollback()
	// What runs is the prepared statement: swapped for another, its
	// calls fail.
	other, err := d.db.PrepareContext(t.Context(), "SELECT 'not the state read'")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	d.prep.m[d.mq.state.q] = other
	if _, err := l.Lock(t.Context(), "k2", locker.Shared(), locker.WithKeepAlive(false)); err == nil {
		t.Error("a Shared Lock ran with another statement prepared as its state read")
	}
	d.prep.m[d.q.acquire] = other
	if _, err := l.TryLock(t.Context(), "k3", locker.WithKeepAlive(false)); err == nil {
		t.Error("a TryLock ran with another statement prepared as its acquire")
	}
}

// Transactions begin IMMEDIATE only where the DSN says so: a database
// given to New by a pool of its own, or a DSN without _txlock=immediate,
// keeps the modal path's lock statement, and its locks work as Open's.
func TestSQLiteBeginsImmediateOnlyWhereTheDSNSaysSo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "imm.db")
	for _, c := range []struct {
		dl   gorm.Dialector
		want bool
	}{
		{gsqlite.Open(path + "?_txlock=immediate"), true},
		{gsqlite.Open(path + "?_pragma=busy_timeout(5000)&_txlock=IMMEDIATE"), true},
		{gsqlite.Open(path), false},
		{gsqlite.Open(path + "?_txlock=deferred"), false},
		{gsqlite.Open(path + "?_txlock=immediate%"), false}, // not a query
		{&gsqlite.Dialector{DSN: path + "?_txlock=immediate", DriverName: "other"}, false},
		{postgres.Open("postgres://u@h/db?_txlock=immediate"), false},
	} {
		if got := beginsImmediate(c.dl); got != c.want {
			t.Errorf("beginsImmediate(%T %+v) = %v, want %v", c.dl, c.dl, got, c.want)
		}
	}

	gdb, _ := gormSQLite(t, path+"?_pragma=journal_mode(WAL)")
	d, err := newDriver(t.Context(), gdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := locker.New(d)
	defer l.Close()
	if d.immediate {
		t.Fatal("a DSN without _txlock=immediate taken as IMMEDIATE")
	}
	a, err := l.TryLock(t.Context(), "k", locker.Shared(), locker.WithKeepAlive(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(t.Context(), "k", locker.WithKeepAlive(false)); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryLock beside a shared hold = %v, want ErrLocked", err)
	}
	if err := a.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// The drivers on one database handle and table share one prepared set
// (400 Lockers on a URL would otherwise keep 400 copies of every
// statement), which the last of them to close closes.
func TestSQLiteDriversShareTheirPreparedStatements(t *testing.T) {
	gdb, db := gormSQLite(t, filepath.Join(t.TempDir(), "share.db")+"?_txlock=immediate")
	a, err := newDriver(t.Context(), gdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newDriver(t.Context(), gdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := newDriver(t.Context(), gdb, nil, WithTable("other_locks"))
	if err != nil {
		t.Fatal(err)
	}
	if a.prep == nil || a.prep != b.prep {
		t.Fatalf("two drivers on one handle and table prepared %p and %p", a.prep, b.prep)
	}
	if other.prep == a.prep {
		t.Fatal("drivers of two tables share one prepared set")
	}
	_ = other.Close(t.Context())
	_ = a.Close(t.Context())
	lb := locker.New(b)
	lease, err := lb.Lock(t.Context(), "k", locker.Shared(), locker.WithKeepAlive(false))
	if err != nil {
		t.Fatalf("Lock after another driver of the handle closed: %v", err)
	}
	if err := lease.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = lb.Close()
	keys := preparedSets.Keys()
	left := slices.Contains(keys, preparedKey{db, DefaultTable})
	leftOther := slices.Contains(keys, preparedKey{db, "other_locks"})
	if left || leftOther {
		t.Fatalf("a prepared set kept after its drivers closed: %v, %v", left, leftOther)
	}
}

// gormSQLite opens the SQLite database dsn names through gorm, as a
// caller of New would; its handle closes when t ends.
func gormSQLite(t *testing.T, dsn string) (*gorm.DB, *dbsql.DB) {
	t.Helper()
	gdb, err := gorm.Open(gsqlite.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	db, err := gdb.DB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return gdb, db
}
