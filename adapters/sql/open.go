package sql

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	gsqlite "github.com/glebarez/sqlite"
	"github.com/jackc/pgx/v5"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/urlx"
)

func init() {
	locker.Register("postgres", openPostgres)
	locker.Register("postgresql", openPostgres)
	locker.Register("sqlite", openSQLite)
}

// gormConfig keeps gorm quiet: errors are returned, and transient ones are
// retried, so logging them would only be noise. gorm.Open writes into its
// config, so each call gets its own.
func gormConfig() *gorm.Config { return &gorm.Config{Logger: logger.Discard} }

// openPostgres opens postgres://user:pass@host:port/db?params. Every
// parameter but table goes to pgx.
func openPostgres(ctx context.Context, u *url.URL) (locker.Locker, error) {
	dsn, opts, err := postgresDSN(u)
	if err != nil {
		return nil, err
	}
	if u.Host != "" { // else a socket directory, given as ?host=
		if _, err := urlx.Hosts(u.Host, "5432"); err != nil {
			return nil, urlx.Invalid(u, "%v", err)
		}
	}
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return nil, urlx.Invalid(u, "%s", urlx.Scrub(err.Error(), u))
	}
	db, err := gorm.Open(postgres.Open(dsn), gormConfig())
	return openWith(ctx, u, db, err, opts)
}

// postgresDSN takes this package's parameters out of u and returns the
// rest as the DSN for pgx.
func postgresDSN(u *url.URL) (string, []Option, error) {
	q, opts, err := takeOptions(u)
	c := *u
	c.RawQuery = q.Encode()
	return c.String(), opts, err
}

// openSQLite opens sqlite:///abs/path.db or sqlite:rel/path.db, creating the
// file if missing, with WAL, a busy timeout and immediate transactions, so
// processes on one machine share it safely.
func openSQLite(ctx context.Context, u *url.URL) (locker.Locker, error) {
	path, opts, err := sqlitePath(u)
	if err != nil {
		return nil, err
	}
	dsn := path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	// Retried while another process holds the file: switching a new file
	// to WAL takes an exclusive lock that SQLite's busy handler does not
	// wait for, so processes opening it at once meet SQLITE_BUSY here.
	var db *gorm.DB
	err = retry(ctx, DefaultRetryTimeout, (&sqliteDialect{}).classify, func(context.Context) (err error) {
		if db, err = gorm.Open(gsqlite.Open(dsn), gormConfig()); err != nil {
			closeGorm(db)
		}
		return err
	}, nil)
	return openWith(ctx, u, db, err, opts)
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

// openWith makes the Locker over db, the outcome of gorm.Open.
func openWith(ctx context.Context, u *url.URL, db *gorm.DB, err error, opts []Option) (locker.Locker, error) {
	if err != nil {
		// Drivers quote the DSN in some errors: show the redacted URL, and
		// the cause without passwords.
		return nil, fmt.Errorf("%w: open %s: %s", locker.ErrUnavailable, urlx.Redact(u), urlx.Scrub(err.Error(), u))
	}
	d, err := newDriver(ctx, db, true, opts...)
	if err != nil {
		closeGorm(db)
		return nil, fmt.Errorf("locker/sql: open %s: %w", urlx.Redact(u), err)
	}
	return wrap(d), nil
}

func closeGorm(db *gorm.DB) {
	if db == nil {
		return
	}
	if sdb, err := db.DB(); err == nil {
		_ = sdb.Close()
	}
}
