package peers

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// BenchmarkMySQL compares our SQL adapter on MariaDB with the two locks a
// MySQL user writes by hand: a lock row polled every 10 ms, and GET_LOCK,
// the server's named lock (a waiter blocks in the server; the lock lives
// as long as its connection). Round trip: SELECT 1.
func BenchmarkMySQL(b *testing.B) {
	u := testenv.URL(b, "LOCKER_TEST_MYSQL")
	db := myConn(b, u, "")
	if _, err := db.Exec("CREATE TABLE IF NOT EXISTS peers_lock_row (`key` VARBINARY(512) PRIMARY KEY, owner VARBINARY(64) NOT NULL, expires_at DATETIME(3) NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	compare(b, func(ctx context.Context) error {
		_, err := db.ExecContext(ctx, "SELECT 1")
		return err
	},
		ours(u.String()),
		subject{"ours-apart", func(tb testing.TB) locker.Locker { return oursApart(tb, u) }},
		subject{"mysql-lock-row", func(tb testing.TB) locker.Locker { return myLockRowClient(tb, u) }},
		subject{"mysql-get-lock", func(tb testing.TB) locker.Locker { return getLockClient(tb, u) }},
		subject{"mysql-row-floor", func(tb testing.TB) locker.Locker { return rowFloorClient(tb, u) }},
		subject{"mysql-fenced-floor", func(tb testing.TB) locker.Locker { return myFencedFloorClient(tb, u) }},
	)
}

// rowFloorClient is a hand-off floor (floors_test.go) for a lock whose
// holder is a row of a MySQL table: a release records the next holder
// with one autocommitted UPDATE of a row (the waiter's own), and wakes it
// in the process, as MySQL has no notification to do it with. Ours writes
// its holder, fence and queue in the same database; no lock that keeps
// its holder in a table hands it over with less.
func rowFloorClient(tb testing.TB, u *url.URL) locker.Locker {
	db, id, granted := myFloorConn(tb, u, "")
	return localFloor{id: id, granted: granted, wake: wakeLocal,
		write: func(ctx context.Context, next string) error {
			_, err := db.ExecContext(ctx, "UPDATE peers_floor_row SET n = n + 1 WHERE id = ?", next)
			return err
		},
	}.client()
}

// myFencedFloorClient is rowFloorClient with what a fenced FIFO lock whose
// queue is in the database writes besides: a refused waiter takes its
// place before it waits (kept if it was there: a waiter that found the key
// free as it armed took it without its place going), and a release, in one
// transaction sent in one round trip, draws a fence from a counter row,
// records it in the next holder's row, and deletes that waiter's place.
// Ours writes the same three rows a hand-off, and reads the queue's head
// besides.
func myFencedFloorClient(tb testing.TB, u *url.URL) locker.Locker {
	db, id, granted := myFloorConn(tb, u, "&multiStatements=true")
	return localFloor{id: id, granted: granted, wake: wakeLocal,
		place: func(ctx context.Context) error {
			_, err := db.ExecContext(ctx, "INSERT INTO peers_floor_place (id) VALUES (?) ON DUPLICATE KEY UPDATE id = id", id)
			return err
		},
		write: func(ctx context.Context, next string) error {
			_, err := db.ExecContext(ctx, "START TRANSACTION;\n"+
				"UPDATE peers_floor_fence SET v = LAST_INSERT_ID(v + 1) WHERE id = 1;\n"+
				"UPDATE peers_floor_row SET n = LAST_INSERT_ID() WHERE id = ?;\n"+
				"DELETE FROM peers_floor_place WHERE id = ?;\n"+
				"COMMIT", next, next)
			return err
		},
	}.client()
}

// myFloorConn is a MySQL floor client's connection (with the DSN's
// parameters more), the floors' tables made, and its id (its row made)
// and wake-up (localWaiter).
func myFloorConn(tb testing.TB, u *url.URL, more string) (*sql.DB, string, <-chan struct{}) {
	db := myConn(tb, u, more)
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS peers_floor_row (id VARBINARY(64) PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE IF NOT EXISTS peers_floor_place (id VARBINARY(64) PRIMARY KEY) ENGINE=InnoDB",
		"CREATE TABLE IF NOT EXISTS peers_floor_fence (id TINYINT PRIMARY KEY, v BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB",
		"INSERT IGNORE INTO peers_floor_fence (id, v) VALUES (1, 0)",
	} {
		if _, err := db.Exec(q); err != nil {
			tb.Fatal(err)
		}
	}
	id, granted := localWaiter(tb)
	if _, err := db.Exec("INSERT INTO peers_floor_row (id, n) VALUES (?, 0)", id); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _, _ = db.Exec("DELETE FROM peers_floor_row WHERE id = ?", id) })
	return db, id, granted
}

// oursApart is our adapter on a pool of its own, as in a process of its
// own: its waiters are woken by other clients' releases through named
// locks, where ours' clients share one process's pool and queue.
func oursApart(tb testing.TB, u *url.URL) locker.Locker {
	pass, _ := u.User.Password()
	dsn := fmt.Sprintf("%s:%s@tcp(%s)%s?interpolateParams=true&multiStatements=true", u.User.Username(), pass, u.Host, u.Path)
	return oursOnPool(tb, gormmysql.Open(dsn))
}

// myConn opens a one-connection pool for u, with the DSN's parameters
// more (each "&name=value"), closed when tb ends.
func myConn(tb testing.TB, u *url.URL, more string) *sql.DB {
	pass, _ := u.User.Password()
	db, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)%s?interpolateParams=true%s", u.User.Username(), pass, u.Host, u.Path, more))
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	cleanup(tb, db.Close)
	return db
}

// myLockRowClient: INSERT IGNORE the key's row, and while another owner's
// row is there (or InnoDB reports a deadlock), try again every 10 ms;
// DELETE it to unlock.
func myLockRowClient(tb testing.TB, u *url.URL) locker.Locker {
	db := myConn(tb, u, "")
	return shim{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			owner := rand.Text()
			for {
				res, err := db.ExecContext(ctx, "INSERT IGNORE INTO peers_lock_row (`key`, owner, expires_at) VALUES (?, ?, NOW(3) + INTERVAL ? SECOND)",
					key, owner, int(ttl.Seconds()))
				var me *mysql.MySQLError
				switch {
				case errors.As(err, &me) && me.Number == 1213: // InnoDB's deadlock with a DELETE: try again
				case err != nil:
					return nil, err
				default:
					if n, _ := res.RowsAffected(); n == 1 {
						return unlockRow(db, key, owner), nil
					}
				}
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(pollEvery):
				}
			}
		},
		close: func() error { return nil }, // myConn's cleanup closes it
	}
}

func unlockRow(db *sql.DB, key, owner string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := db.ExecContext(ctx, "DELETE FROM peers_lock_row WHERE `key` = ? AND owner = ?", key, owner)
		return err
	}
}

// getLockClient: SELECT GET_LOCK(name, timeout) on the client's own
// connection, RELEASE_LOCK to unlock. Names are at most 64 characters: the
// key's SHA-1.
func getLockClient(tb testing.TB, u *url.URL) locker.Locker {
	db := myConn(tb, u, "")
	name := func(key string) string { h := sha1.Sum([]byte(key)); return hex.EncodeToString(h[:]) }
	return shim{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			var got sql.NullInt64
			if err := db.QueryRowContext(ctx, "SELECT GET_LOCK(?, 60)", name(key)).Scan(&got); err != nil {
				return nil, err
			}
			if got.Int64 != 1 {
				return nil, fmt.Errorf("GET_LOCK %q: timed out", key)
			}
			return func(ctx context.Context) error {
				_, err := db.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", name(key))
				return err
			}, nil
		},
		close: func() error { return nil },
	}
}
