package sql_test

import (
	"context"
	dbsql "database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker"
	lsql "github.com/locker-go/locker/adapters/sql"
	"github.com/locker-go/locker/conformance"
	"github.com/locker-go/locker/conformance/faultproxy"
	"github.com/locker-go/locker/internal/testenv"

	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite", for the harness's own reads
)

// postgresHarness drives the Postgres of scripts/backends. With proxy,
// each Locker dials through its own fault proxy, which Crash cuts;
// benchmarks dial directly, as RoundTrip does. The proxies close when t
// ends; the suite closes the Lockers.
func postgresHarness(t testing.TB, proxy bool) conformance.Harness {
	u := testenv.URL(t, "LOCKER_TEST_POSTGRES")
	db := openDB(t, "pgx", u.String())
	return queuedHarness(t, u, proxy, db, countOf(`SELECT (%s)`, " + ", func(table string) string {
		return fmt.Sprintf(`SELECT count(*) FROM %s WHERE left("key", char_length($1)) = $1`, table)
	}))
}

// mysqlHarness drives the MariaDB of scripts/backends, as postgresHarness
// does Postgres.
func mysqlHarness(t testing.TB, proxy bool) conformance.Harness {
	u := testenv.URL(t, "LOCKER_TEST_MYSQL")
	pass, _ := u.User.Password()
	db := openDB(t, "mysql", fmt.Sprintf("%s:%s@tcp(%s)%s", u.User.Username(), pass, u.Host, u.Path))
	return queuedHarness(t, u, proxy, db, countOf("SELECT (%s) FROM (SELECT ? AS p) a", " + ", func(table string) string {
		return fmt.Sprintf("SELECT count(*) FROM %s l WHERE LEFT(l.`key`, LENGTH(a.p)) = a.p", table)
	}))
}

// queuedHarness is the Harness of a database server whose waiters queue
// in a table: Lockers on u through fault proxies (see proxied), FIFO, and
// Count by countQ (one parameter, the prefix), which counts the rows of
// holders and of queued waiters, read through db.
func queuedHarness(t testing.TB, u *url.URL, proxy bool, db *dbsql.DB, countQ string) conformance.Harness {
	crasher, newLocker := proxied(t, u, proxy)
	first := open(t, u.String()) // creates the schema, Count's tables
	listAll(t, first)
	_ = first.Close()
	return conformance.Harness{
		NewLocker: newLocker,
		Crash:     crasher.Crash,
		Hang:      crasher.Blackhole,
		Slow:      crasher.Delay,
		Count: func(ctx context.Context, prefix string) (int, error) {
			return count(ctx, db, countQ, prefix)
		},
		FIFO: true,
		RoundTrip: func(ctx context.Context) error {
			_, err := db.ExecContext(ctx, "SELECT 1")
			return err
		},
	}
}

// proxied returns a Harness's NewLocker for u: with proxy, each Locker
// dials through a fault proxy of its own, which the Crasher cuts, delays or
// blackholes; else directly. The proxies close when t ends.
func proxied(t testing.TB, u *url.URL, proxy bool) (*faultproxy.Crasher, func(context.Context) (locker.Locker, error)) {
	crasher := new(faultproxy.Crasher)
	t.Cleanup(func() { _ = crasher.Close() })
	return crasher, func(ctx context.Context) (locker.Locker, error) {
		if !proxy {
			return locker.Open(ctx, u.String())
		}
		p, err := crasher.Proxy(u.Host)
		if err != nil {
			return nil, err
		}
		pu := *u
		pu.Host = p.Addr()
		l, err := locker.Open(ctx, pu.String())
		if err != nil {
			return nil, err
		}
		crasher.Track(l, p)
		return l, nil
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
	listAll(t, first) // and the subtree space's
	db := openDB(t, "sqlite", u.Path)
	return conformance.Harness{
		// Every write of every check waits its turn for the one file: in a
		// full -race run beside the other packages, renewals of 1 s leases
		// came too late (a lease of ManyLeases lost, an election's leader
		// seen lapsed). 2 s leaves them 1.3 s.
		TTL:       2 * time.Second,
		NewLocker: func(ctx context.Context) (locker.Locker, error) { return lsql.Open(ctx, raw) },
		Crash: func(_ context.Context, l locker.Locker) error {
			lsql.Crash(l)
			return nil
		},
		Count: func(ctx context.Context, prefix string) (int, error) {
			return count(ctx, db, countOf(`SELECT (%s)`, " + ", func(table string) string {
				return fmt.Sprintf(`SELECT count(*) FROM %s WHERE substr("key", 1, length($1)) = $1`, table)
			}), prefix)
		},
		RoundTrip: func(ctx context.Context) error {
			_, err := db.ExecContext(ctx, "SELECT 1")
			return err
		},
	}
}

func TestConformancePostgres(t *testing.T) { conformance.Run(t, postgresHarness(t, true)) }
func TestConformanceSQLite(t *testing.T)   { conformance.Run(t, sqliteHarness(t)) }
func TestConformanceMySQL(t *testing.T)    { conformance.Run(t, mysqlHarness(t, true)) }

// TestConformanceMySQLSingleStatements runs the suite where the server
// takes one statement per query (multiStatements=false): each batch's
// statements go one by one. Without the slowed-link step: a queued grant
// is then five round trips (claim, fence draw, fence, leaving the queue,
// release), at the step's 100 ms each 10 grants take 6-8 s, at the edge
// of its 8 s.
func TestConformanceMySQLSingleStatements(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_MYSQL")
	q := u.Query()
	q.Set("multiStatements", "false")
	u.RawQuery = q.Encode()
	t.Setenv("LOCKER_TEST_MYSQL", u.String())
	h := mysqlHarness(t, true)
	h.Slow = nil
	conformance.Run(t, h)
}

func BenchmarkConformancePostgres(b *testing.B) { conformance.Bench(b, postgresHarness(b, false)) }
func BenchmarkConformanceSQLite(b *testing.B)   { conformance.Bench(b, sqliteHarness(b)) }
func BenchmarkConformanceMySQL(b *testing.B)    { conformance.Bench(b, mysqlHarness(b, false)) }

func open(t testing.TB, raw string) locker.Locker {
	t.Helper()
	l, err := locker.Open(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// listAll lists l's locks: the subtree space's tables are then there.
func listAll(t testing.TB, l locker.Locker) {
	t.Helper()
	if _, err := l.(locker.Admin).List(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
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

// countTables are the tables that keep a key's records: holders and
// waiters, plain and subtree.
var countTables = []string{"locker_locks", "locker_locks_hold", "locker_locks_queue",
	"locker_locks_tree", "locker_locks_tree_hold", "locker_locks_tree_queue"}

// countOf is format with one count per table, each by count, joined by sep.
func countOf(format, sep string, count func(table string) string) string {
	parts := make([]string, len(countTables))
	for i, t := range countTables {
		parts[i] = "(" + count(t) + ")"
	}
	return fmt.Sprintf(format, strings.Join(parts, sep))
}

func count(ctx context.Context, db *dbsql.DB, q, prefix string) (int, error) {
	var n int
	if err := db.QueryRowContext(ctx, q, prefix).Scan(&n); err != nil {
		return 0, fmt.Errorf("count rows: %w", err)
	}
	return n, nil
}
