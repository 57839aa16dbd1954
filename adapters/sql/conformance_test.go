package sql_test

import (
	"context"
	dbsql "database/sql"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/locker-go/locker"
	lsql "github.com/locker-go/locker/adapters/sql"
	"github.com/locker-go/locker/conformance"
	"github.com/locker-go/locker/internal/faultproxy"
	"github.com/locker-go/locker/internal/testenv"

	_ "github.com/glebarez/go-sqlite"  // database/sql driver "sqlite", for the harness's own reads
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// postgresHarness drives the Postgres of scripts/backends. With proxied,
// each Locker dials through its own fault proxy, which Crash cuts;
// benchmarks dial directly, as RoundTrip does.
func postgresHarness(t testing.TB, proxied bool) conformance.Harness {
	u := testenv.URL(t, "LOCKER_TEST_POSTGRES")
	db := openDB(t, "pgx", u.String())
	var crasher faultproxy.Crasher
	return conformance.Harness{
		NewLocker: func(t testing.TB) locker.Locker {
			if !proxied {
				return open(t, u.String())
			}
			p := crasher.Proxy(t, u.Host)
			pu := *u
			pu.Host = p.Addr()
			l, err := locker.Open(context.Background(), pu.String())
			if err != nil {
				t.Fatal(err)
			}
			crasher.Track(l, p)
			return l
		},
		Crash: crasher.Crash,
		// Rows of holders and of queued waiters.
		Count: func(t testing.TB, prefix string) int {
			return count(t, db, `SELECT (SELECT count(*) FROM locker_locks WHERE left("key", char_length($1)) = $1)
				+ (SELECT count(*) FROM locker_locks_queue WHERE left("key", char_length($1)) = $1)`, prefix)
		},
		FIFO: true,
		RoundTrip: func(ctx context.Context) error {
			_, err := db.ExecContext(ctx, "SELECT 1")
			return err
		},
	}
}

// sqliteHarness drives a SQLite file: LOCKER_TEST_SQLITE, else a fresh one.
// Each Locker has its own handle on the file, like a separate process.
func sqliteHarness(t testing.TB) conformance.Harness {
	raw := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "locks.db"))
	if os.Getenv("LOCKER_TEST_SQLITE") != "" {
		raw = testenv.URL(t, "LOCKER_TEST_SQLITE").String()
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	first := open(t, raw) // creates the file and schema
	t.Cleanup(func() { _ = first.Close() })
	db := openDB(t, "sqlite", u.Path)
	return conformance.Harness{
		NewLocker: func(t testing.TB) locker.Locker { return open(t, raw) },
		Crash:     func(t testing.TB, l locker.Locker) { lsql.Crash(l) },
		Count: func(t testing.TB, prefix string) int {
			return count(t, db, `SELECT count(*) FROM locker_locks WHERE substr("key", 1, length($1)) = $1`, prefix)
		},
		RoundTrip: func(ctx context.Context) error {
			_, err := db.ExecContext(ctx, "SELECT 1")
			return err
		},
	}
}

func TestConformancePostgres(t *testing.T) { conformance.Run(t, postgresHarness(t, true)) }
func TestConformanceSQLite(t *testing.T)   { conformance.Run(t, sqliteHarness(t)) }

func BenchmarkConformancePostgres(b *testing.B) { conformance.Bench(b, postgresHarness(b, false)) }
func BenchmarkConformanceSQLite(b *testing.B)   { conformance.Bench(b, sqliteHarness(b)) }

func open(t testing.TB, raw string) locker.Locker {
	t.Helper()
	l, err := locker.Open(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func openDB(t testing.TB, driver, dsn string) *dbsql.DB {
	t.Helper()
	db, err := dbsql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func count(t testing.TB, db *dbsql.DB, q, prefix string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, prefix).Scan(&n); err != nil {
		t.Fatalf("count rows: %v", err)
	}
	return n
}
