package sql

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	gsqlite "github.com/glebarez/sqlite"
	"github.com/jackc/pgx/v5"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/locker-go/locker"
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
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return nil, fmt.Errorf("%w: %s: %s", locker.ErrInvalidURL, redact(u), scrub(u, err))
	}
	db, err := gorm.Open(postgres.Open(dsn), gormConfig())
	if err != nil {
		return nil, invalidOrUnavailable(u, err)
	}
	return openWith(ctx, u, db, opts)
}

// postgresDSN takes this package's parameters out of u and returns the
// rest as the DSN for pgx.
func postgresDSN(u *url.URL) (string, []Option, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s: bad query", locker.ErrInvalidURL, redact(u))
	}
	opts, err := takeOptions(u, q)
	if err != nil {
		return "", nil, err
	}
	c := *u
	c.RawQuery = q.Encode()
	return c.String(), opts, nil
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
	db, err := openBusy(ctx, dsn)
	if err != nil {
		return nil, invalidOrUnavailable(u, err)
	}
	return openWith(ctx, u, db, opts)
}

// openBusy opens the SQLite file, retrying while another process holds it:
// switching a new file to WAL takes an exclusive lock that SQLite's busy
// handler does not wait for, so processes opening it at once meet
// SQLITE_BUSY here.
func openBusy(ctx context.Context, dsn string) (*gorm.DB, error) {
	end := time.Now().Add(DefaultRetryTimeout)
	backoff := time.Millisecond
	for {
		db, err := gorm.Open(gsqlite.Open(dsn), gormConfig())
		if busy, _ := (&sqliteDialect{}).classify(err); !busy || time.Now().After(end) {
			return db, err
		}
		if db != nil {
			if sdb, e := db.DB(); e == nil {
				_ = sdb.Close()
			}
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// sqlitePath returns the file a sqlite URL names.
func sqlitePath(u *url.URL) (string, []Option, error) {
	var path string
	switch {
	case u.Opaque != "": // sqlite:rel/path.db
		p, err := url.PathUnescape(u.Opaque)
		if err != nil {
			return "", nil, fmt.Errorf("%w: %s: bad path", locker.ErrInvalidURL, redact(u))
		}
		path = p
	case u.Host != "" || u.User != nil:
		return "", nil, fmt.Errorf("%w: %s: a sqlite URL has no host: use sqlite:///abs/path.db or sqlite:rel/path.db", locker.ErrInvalidURL, redact(u))
	default: // sqlite:///abs/path.db
		path = u.Path
	}
	if path == "" || strings.HasSuffix(path, "/") {
		return "", nil, fmt.Errorf("%w: %s: no file name", locker.ErrInvalidURL, redact(u))
	}
	if strings.ContainsAny(path, "?\x00") || strings.HasPrefix(path, "file:") || path == ":memory:" {
		return "", nil, fmt.Errorf("%w: %s: unsupported file name", locker.ErrInvalidURL, redact(u))
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s: bad query", locker.ErrInvalidURL, redact(u))
	}
	opts, err := takeOptions(u, q)
	if err != nil {
		return "", nil, err
	}
	for k := range q {
		return "", nil, fmt.Errorf("%w: %s: unknown parameter %q (sqlite takes only table)", locker.ErrInvalidURL, redact(u), k)
	}
	return path, opts, nil
}

// takeOptions removes this package's parameters from q.
func takeOptions(u *url.URL, q url.Values) ([]Option, error) {
	var opts []Option
	if t, ok := q["table"]; ok {
		if len(t) != 1 {
			return nil, fmt.Errorf("%w: %s: table given %d times", locker.ErrInvalidURL, redact(u), len(t))
		}
		opts = append(opts, WithTable(t[0]))
		delete(q, "table")
	}
	if _, err := resolve(opts); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", locker.ErrInvalidURL, redact(u), err)
	}
	return opts, nil
}

func openWith(ctx context.Context, u *url.URL, db *gorm.DB, opts []Option) (locker.Locker, error) {
	d, err := newDriver(ctx, db, true, opts...)
	if err != nil {
		if sdb, e := db.DB(); e == nil {
			_ = sdb.Close()
		}
		return nil, fmt.Errorf("locker/sql: open %s: %w", redact(u), err)
	}
	return wrap(d), nil
}

// invalidOrUnavailable classifies a gorm.Open failure. Drivers quote the
// DSN in some errors, so only the redacted URL is shown, with the cause's
// type of failure.
func invalidOrUnavailable(u *url.URL, err error) error {
	return fmt.Errorf("%w: open %s: %s", locker.ErrUnavailable, redact(u), scrub(u, err))
}

// scrub is err's message without u's passwords.
func scrub(u *url.URL, err error) string {
	msg := err.Error()
	for _, pw := range passwords(u) {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	return msg
}

// redact is u for messages: without the password of its user info or of a
// password parameter (which pgx also reads).
func redact(u *url.URL) string {
	c := *u
	if q, err := url.ParseQuery(c.RawQuery); err == nil && q.Has("password") {
		q.Set("password", "xxxxx")
		c.RawQuery = q.Encode()
	} else if err != nil {
		c.RawQuery = "…"
	}
	return c.Redacted()
}

func passwords(u *url.URL) []string {
	var pws []string
	if pw, ok := u.User.Password(); ok && pw != "" {
		pws = append(pws, pw)
	}
	if q, err := url.ParseQuery(u.RawQuery); err == nil {
		for _, pw := range q["password"] {
			if pw != "" {
				pws = append(pws, pw)
			}
		}
	}
	return pws
}
