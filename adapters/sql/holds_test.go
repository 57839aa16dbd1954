package sql

import (
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// testLocker is a Locker with its driver, whose dialect's hooks a test may swap.
type testLocker struct {
	locker.Locker
	*sqlDriver
}

// dialects opens a Locker on each database: the Postgres and MariaDB of
// scripts/backends (MariaDB twice: its acquire in one batch of statements,
// and one statement at a time, as on a pool without multiStatements) and a
// fresh SQLite file.
func dialects(t *testing.T) map[string]*testLocker {
	t.Helper()
	ls := map[string]*testLocker{}
	for name, raw := range map[string]string{
		"postgres":                testenv.URL(t, "LOCKER_TEST_POSTGRES").String(),
		"sqlite":                  "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "holds.db")),
		"mysql":                   testenv.URL(t, "LOCKER_TEST_MYSQL").String(),
		"mysql-single-statements": testenv.URL(t, "LOCKER_TEST_MYSQL").String() + "?multiStatements=false",
	} {
		l, err := Open(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		ls[name] = &testLocker{l, driverOf(l)}
		if multi := multiStatements(context.Background(), driverOf(l).db); name == "mysql" && !multi || name == "mysql-single-statements" && multi {
			t.Fatalf("%s: multiStatements %v", name, multi)
		}

	}
	return ls
}

// holds is the key's live hold count, 0 if no row.
func holds(t *testing.T, l *testLocker, key string) int {
	t.Helper()
	info, err := l.sqlDriver.Status(context.Background(), driver.Plain, key)
	if errors.Is(err, locker.ErrNotHeld) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return info.Holds
}

// A statement that is run again with the same hold id, as a retry after a
// lost reply does, adds or drops nothing more; and a release retried after
// the owner took the key again never drops the newer hold.
func TestHoldIDsIdempotent(t *testing.T) {
	ctx := context.Background()
	for name, l := range dialects(t) {
		t.Run(name, func(t *testing.T) {
			key, owner := "holds-"+rand.Text(), "x"
			acquire := func(id string) uint64 {
				t.Helper()
				g, err := l.acquireOnce(ctx, l.sqlDriver, &driver.Request{Key: key, Owner: owner, ID: id, TTL: time.Minute})
				if err != nil || g.Hold == nil {
					t.Fatalf("acquire %s = %v, %v", id, g.Hold != nil, err)
				}
				return g.Fence
			}
			release := func(id string, fence uint64) bool {
				t.Helper()
				ok, _, err := l.releaseOnce(ctx, &hold{d: l.sqlDriver, key: key, owner: owner, id: id, fence: fence})
				if err != nil {
					t.Fatalf("release %s: %v", id, err)
				}
				return ok
			}
			f := acquire("a")
			if again := acquire("a"); again != f || holds(t, l, key) != 1 {
				t.Fatalf("acquire retried: fence %d (first %d), holds %d; want the same fence and 1 hold", again, f, holds(t, l, key))
			}
			acquire("b")
			if n := holds(t, l, key); n != 2 {
				t.Fatalf("re-entered: holds %d, want 2", n)
			}
			if !release("a", f) {
				t.Fatal("release of hold a: not ours")
			}
			if release("a", f) {
				t.Error("release of hold a retried: applied again")
			}
			acquire("c") // the owner re-enters before a late retry of a's release
			if release("a", f) {
				t.Error("late retry of a's release: applied again")
			}
			if n := holds(t, l, key); n != 2 {
				t.Fatalf("after a's release and its retries: holds %d, want b and c", n)
			}
			if !release("b", f) || !release("c", f) {
				t.Fatal("release of holds b, c: not ours")
			}
			if n := holds(t, l, key); n != 0 {
				t.Errorf("after every hold was released: holds %d, want no row", n)
			}
		})
	}
}

// lossy wraps acquire so that its first attempt lands but then fails as
// fail says: the reply was lost, or the caller gave up meanwhile.
func lossy(acquire acquireFunc, fail func() error) acquireFunc {
	calls := 0
	return func(ctx context.Context, d *sqlDriver, r *driver.Request) (driver.Grant, error) {
		g, err := acquire(ctx, d, r)
		if calls++; calls == 1 && err == nil && g.Hold != nil {
			return driver.Grant{}, fail()
		}
		return g, err
	}
}

type acquireFunc = func(context.Context, *sqlDriver, *driver.Request) (driver.Grant, error)

// lostReply is how each dialect fails a statement that may have been
// applied and is worth retrying.
var lostReply = map[string]error{
	"postgres":                errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"),
	"sqlite":                  busy{},
	"mysql":                   &mysql.MySQLError{Number: 2013, Message: "Lost connection to server during query"},
	"mysql-single-statements": &mysql.MySQLError{Number: 2013, Message: "Lost connection to server during query"},
}

type busy struct{}

func (busy) Error() string { return "database is locked (5) (SQLITE_BUSY)" }
func (busy) Code() int     { return 5 }

// A WithOwner Lock whose first reply is lost is retried, and the retry
// does not count the hold twice: one Unlock frees the key.
func TestLostReplyRetriedOnce(t *testing.T) {
	ctx := context.Background()
	for name, l := range dialects(t) {
		t.Run(name, func(t *testing.T) {
			key := "lost-" + rand.Text()
			real := l.acquireOnce
			l.acquireOnce = lossy(real, func() error { return lostReply[name] })
			defer func() { l.acquireOnce = real }()
			lease, err := l.Lock(ctx, key, locker.WithOwner("x"))
			if err != nil {
				t.Fatal(err)
			}
			if n := holds(t, l, key); n != 1 {
				t.Errorf("after a retried acquire: holds %d, want 1", n)
			}
			if err := lease.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if n := holds(t, l, key); n != 0 {
				t.Errorf("after Unlock: holds %d, want no row", n)
			}
		})
	}
}

// A Lock that gives up after its acquire landed takes its hold back: the
// key is not left held until the TTL. For a WithOwner identity only that
// attempt's hold goes; the owner's other lease keeps the key.
func TestAbandonedAcquireUndone(t *testing.T) {
	for name, l := range dialects(t) {
		t.Run(name, func(t *testing.T) {
			for _, stable := range []bool{false, true} {
				key := "abandoned-" + rand.Text()
				var opts []locker.Option
				var other locker.Lease
				if stable {
					opts = append(opts, locker.WithOwner("x"))
					var err error
					if other, err = l.TryLock(context.Background(), key, opts...); err != nil {
						t.Fatal(err)
					}
				}
				ctx, cancel := context.WithCancel(context.Background())
				real := l.acquireOnce
				l.acquireOnce = lossy(real, func() error { cancel(); return context.Canceled })
				lease, err := l.Lock(ctx, key, append(opts, locker.WithTTL(time.Minute))...)
				l.acquireOnce = real
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("stable owner %v: Lock cancelled after its acquire landed = %v, %v; want context.Canceled", stable, lease, err)
				}
				want := 0
				if stable {
					want = 1
				}
				if n := holds(t, l, key); n != want {
					t.Errorf("stable owner %v: holds %d after the abandoned Lock, want %d", stable, n, want)
				}
				if other != nil {
					if err := other.Unlock(context.Background()); err != nil {
						t.Errorf("the owner's other lease: %v", err)
					}
				}
			}
		})
	}
}
