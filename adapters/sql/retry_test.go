package sql

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	gsqlite "github.com/libtnb/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/locker-go/locker"
)

// With SQLite's own busy wait off, a write lock held elsewhere makes every
// statement fail with SQLITE_BUSY: the adapter retries within the caller's
// deadline, and acquires once the writer is gone; never a false success.
func TestSQLiteBusyRetried(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.db")
	gdb, err := gorm.Open(gsqlite.Open(path+"?_pragma=busy_timeout(0)&_pragma=journal_mode(WAL)"), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(gdb)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	db, _ := gdb.DB()
	defer db.Close()

	// Another handle on the file takes the write lock and keeps it.
	other, err := gorm.Open(gsqlite.Open(path+"?_pragma=busy_timeout(0)"), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	odb, _ := other.DB()
	defer odb.Close()
	conn, err := odb.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = l.TryLock(ctx, "busy")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryLock while the file is write-locked = %v, want the deadline's error", err)
	}

	done := make(chan error, 1)
	go func() {
		lease, err := l.TryLock(context.Background(), "busy")
		if err == nil {
			err = lease.Unlock(context.Background())
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // let it meet SQLITE_BUSY a few times
	if _, err := conn.ExecContext(context.Background(), "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("TryLock retried past SQLITE_BUSY = %v", err)
	}
}

func TestPostgresClassify(t *testing.T) {
	for _, c := range []struct {
		err                  error
		transient, ambiguous bool
	}{
		{&pgconn.PgError{Code: "40001"}, true, false},
		{&pgconn.PgError{Code: "40P01"}, true, false},
		{&pgconn.PgError{Code: "08006"}, true, true},
		{&pgconn.PgError{Code: "42P01"}, false, true},
		{errors.New("read tcp: connection reset by peer"), true, true},
		{errors.New("sql: database is closed"), false, false},
	} {
		tr, amb := pgClassify(c.err)
		if tr != c.transient || (tr && amb != c.ambiguous) {
			t.Errorf("classify(%v) = %v, %v; want %v, %v", c.err, tr, amb, c.transient, c.ambiguous)
		}
	}
}
