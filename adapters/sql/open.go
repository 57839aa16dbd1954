package sql

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	gsqlite "github.com/libtnb/sqlite"
	gmysql "gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/perproc"
	"github.com/locker-go/locker/internal/urlx"
)

func init() {
	for _, scheme := range []string{"postgres", "postgresql", "mysql", "sqlite"} {
		locker.Register(scheme, func(ctx context.Context, u *url.URL) (locker.Locker, error) {
			d, err := openDriver(ctx, u)
			if err != nil {
				return nil, err
			}
			return d.locker(), nil
		})
	}
}

// openDriver opens the database u names, checked before anything is
// contacted. Lockers of this process opened on the same database share one
// handle, and so one pool (see pools).
func openDriver(ctx context.Context, u *url.URL) (*sqlDriver, error) { return openIn(ctx, u, &pools) }

// openIn is openDriver sharing handles in pools (tests: a fresh one).
func openIn(ctx context.Context, u *url.URL, pools *perproc.Map[string, *gorm.DB]) (*sqlDriver, error) {
	dialector, dsn, opts, err := dialector(u)
	if err != nil {
		return nil, err
	}
	db, closeDB, err := pools.Get(ctx, u.Scheme+" "+dsn, func() (*gorm.DB, error) { return openDB(ctx, u, dialector) }, closeGorm)
	if err != nil {
		return nil, err
	}
	d, err := newDriver(ctx, db, closeDB, opts...)
	if err != nil {
		closeDB()
		return nil, fmt.Errorf("locker/sql: open %s: %w", urlx.Redact(u), err)
	}
	return d, nil
}

// pools are the database handles of Lockers opened by URL, by scheme and
// DSN: 400 Lockers on one URL share one pool of urlPoolSize connections
// instead of keeping an idle connection each and running the server out of
// them. A waiter holds no connection while it waits, so sharing costs it
// nothing.
var pools perproc.Map[string, *gorm.DB]

// openDB opens what dialector names.
func openDB(ctx context.Context, u *url.URL, dialector gorm.Dialector) (*gorm.DB, error) {
	// Retried on SQLITE_BUSY (sqliteClassify retries no Postgres error):
	// switching a new file to WAL takes an exclusive lock that SQLite's busy
	// handler does not wait for, so processes opening it at once meet it.
	var (
		db    *gorm.DB
		cause error
	)
	err := retry(ctx, DefaultRetryTimeout, sqliteClassify, func(context.Context) error {
		// Quiet: errors are returned, transient ones retried. gorm.Open
		// writes into its config, so each call gets its own.
		db, cause = gorm.Open(dialector, &gorm.Config{Logger: logger.Discard})
		return cause
	}, nil)
	if err != nil {
		// Drivers quote the DSN in some errors: show the redacted URL, and
		// the cause without passwords.
		return nil, fmt.Errorf("%w: open %s: %s", locker.ErrUnavailable, urlx.Redact(u), urlx.Scrub(cause.Error(), u))
	}
	if sqlDB, err := db.DB(); err == nil && u.Scheme != "sqlite" {
		sqlDB.SetMaxOpenConns(urlPoolSize)
		sqlDB.SetMaxIdleConns(urlPoolSize) // not 2: a busy pool would reconnect per statement
	}
	return db, nil
}

func closeGorm(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}
}

// urlPoolSize caps the pooled connections that the Postgres Lockers of a
// process opened on one URL share (their LISTEN connection apart): every
// statement is one round trip on a pooled connection, so waiters take turns
// on a few instead of holding one each, and any number of Lockers stays well
// within a server's max_connections. A *gorm.DB given to New keeps its own
// settings.
const urlPoolSize = 16

// dialector returns what gorm opens for u, its DSN, and u's options.
// SQLite gets WAL, a busy timeout and immediate transactions, so processes
// on one machine share the file safely.
func dialector(u *url.URL) (gorm.Dialector, string, []Option, error) {
	if u.Scheme == "mysql" {
		dsn, opts, err := mysqlDSN(u)
		return gmysql.Open(dsn), dsn, opts, err
	}
	if u.Scheme != "sqlite" {
		dsn, opts, err := postgresDSN(u)
		return postgres.Open(dsn), dsn, opts, err
	}
	path, opts, err := sqlitePath(u)
	if err == nil {
		err = sqliteDir(path)
	}
	dsn := path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	return gsqlite.Open(dsn), dsn, opts, err
}

// postgresDSN takes this package's parameters out of a postgres URL and
// returns the rest as the DSN for pgx.
func postgresDSN(u *url.URL) (string, []Option, error) {
	q, opts, err := takeOptions(u)
	if err != nil {
		return "", nil, err
	}
	if u.Host != "" { // else a socket directory, given as ?host=
		if _, err := urlx.Hosts(u.Host, "5432"); err != nil {
			return "", nil, urlx.Invalid(u, "%v", err)
		}
	}
	c := *u
	c.RawQuery = q.Encode()
	if _, err := pgx.ParseConfig(c.String()); err != nil {
		return "", nil, urlx.Invalid(u, "%s", urlx.Scrub(err.Error(), u))
	}
	return c.String(), opts, nil
}

// mysqlDSN turns mysql://user:password@host[:port]/db?params into the DSN
// of github.com/go-sql-driver/mysql, whose parameters it passes on (this
// package's own taken out). Unless the URL says otherwise, statements are
// interpolated on the client (interpolateParams=true: one round trip per
// statement instead of a prepare, an execute and a close), and an acquire
// sends its statements at once (multiStatements=true; the pool is this
// package's own).
func mysqlDSN(u *url.URL) (string, []Option, error) {
	q, opts, err := takeOptions(u)
	if err != nil {
		return "", nil, err
	}
	if u.Opaque != "" || u.Host == "" {
		return "", nil, urlx.Invalid(u, "want mysql://user:password@host:port/db")
	}
	hosts, err := urlx.Hosts(u.Host, "3306")
	if err != nil || len(hosts) != 1 {
		return "", nil, urlx.Invalid(u, "want one host[:port]")
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return "", nil, urlx.Invalid(u, "want the database as the path: mysql://host:port/db")
	}
	for _, p := range []string{"interpolateParams", "multiStatements"} {
		if _, ok := q[p]; !ok {
			q.Set(p, "true")
		}
	}
	cfg, err := mysql.ParseDSN("tcp(" + hosts[0] + ")/" + db + "?" + q.Encode())
	if err != nil {
		return "", nil, urlx.Invalid(u, "%s", urlx.Scrub(err.Error(), u))
	}
	if u.User != nil { // set apart: a password may hold any character
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	dsn := cfg.FormatDSN()
	return dsn, opts, nil
}

// sqlitePath returns the file a sqlite URL names.
func sqlitePath(u *url.URL) (string, []Option, error) {
	path := u.Path      // sqlite:///abs/path.db
	if u.Opaque != "" { // sqlite:rel/path.db
		var err error
		if path, err = url.PathUnescape(u.Opaque); err != nil {
			return "", nil, urlx.Invalid(u, "bad path")
		}
	} else if u.Host != "" || u.User != nil {
		return "", nil, urlx.Invalid(u, "a sqlite URL has no host: use sqlite:///abs/path.db or sqlite:rel/path.db")
	}
	if path == "" || strings.HasSuffix(path, "/") {
		return "", nil, urlx.Invalid(u, "no file name")
	}
	if strings.ContainsAny(path, "?\x00") || strings.HasPrefix(path, "file:") || path == ":memory:" {
		return "", nil, urlx.Invalid(u, "unsupported file name")
	}
	q, opts, err := takeOptions(u)
	for k := range q {
		return "", nil, urlx.Invalid(u, "unknown parameter %q (sqlite takes only table)", k)
	}
	return path, opts, err
}

// sqliteDir reports a path whose directory is missing as unavailable, as
// an unreachable server is, saying so: SQLite makes the file, not its
// directory, and says only "unable to open database file: out of memory".
func sqliteDir(path string) error {
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) || err == nil && !fi.IsDir() {
		return locker.Unavailable(fmt.Errorf("locker/sql: the directory %s does not exist (SQLite makes the file, not its directory)", dir))
	}
	return nil
}

// takeOptions returns u's query without this package's parameters, and
// the options they make.
func takeOptions(u *url.URL) (url.Values, []Option, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, nil, urlx.Invalid(u, "bad query")
	}
	var opts []Option
	if t, ok := q["table"]; ok {
		if len(t) != 1 {
			return nil, nil, urlx.Invalid(u, "table given %d times", len(t))
		}
		opts = append(opts, WithTable(t[0]))
		delete(q, "table")
	}
	if _, err := resolve(opts); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", locker.ErrInvalidURL, urlx.Redact(u), err)
	}
	return q, opts, nil
}
