package sql

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/locker-go/locker"
)

func TestSQLitePath(t *testing.T) {
	for raw, want := range map[string]string{
		"sqlite:///tmp/x.db":                "/tmp/x.db",
		"sqlite:///tmp/a%20b.db":            "/tmp/a b.db",
		"sqlite:rel/x.db":                   "rel/x.db",
		"sqlite:x.db?table=other":           "x.db",
		"SQLITE:///var/lib/locker/locks.db": "/var/lib/locker/locks.db",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := sqlitePath(u)
		if err != nil || got != want {
			t.Errorf("sqlitePath(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
}

func TestPostgresDSN(t *testing.T) {
	u, _ := url.Parse("postgres://u:p@h:5432/db?sslmode=disable&table=jobs&application_name=x")
	dsn, opts, err := postgresDSN(u)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dsn, "table=") || !strings.Contains(dsn, "sslmode=disable") || !strings.Contains(dsn, "application_name=x") {
		t.Errorf("dsn %q: want pgx's parameters without table", dsn)
	}
	if c, _ := resolve(opts); c.table != "jobs" {
		t.Errorf("table = %q, want jobs", c.table)
	}
}

func TestMySQLDSN(t *testing.T) {
	u, _ := url.Parse("mysql://u:p%40ss@h:3307/db?table=jobs&timeout=2s")
	dsn, opts, err := mysqlDSN(u)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"u:p@ss@tcp(h:3307)/db?", "timeout=2s", "interpolateParams=true", "multiStatements=true"} {
		if !strings.Contains(dsn, want) || strings.Contains(dsn, "table=") {
			t.Errorf("dsn %q: want %q in it, and no table", dsn, want)
		}
	}
	if c, _ := resolve(opts); c.table != "jobs" {
		t.Errorf("table = %q, want jobs", c.table)
	}
	u, _ = url.Parse("mysql://u@h/db?multiStatements=false")
	if dsn, _, _ := mysqlDSN(u); !strings.Contains(dsn, "u@tcp(h:3306)/db?") || strings.Contains(dsn, "multiStatements") {
		t.Errorf("dsn %q: want the default port, and the URL's own multiStatements (false)", dsn)
	}
}

// Bad URLs fail with ErrInvalidURL before touching anything, and never
// show the password.
func TestOpenInvalidURL(t *testing.T) {
	for _, raw := range []string{
		"sqlite://x.db",               // a host, not a file
		"sqlite://user:secret@h/x.db", // a host with credentials
		"sqlite:///",                  // no file name
		"sqlite:///tmp/dir/",          // a directory
		"sqlite:///tmp/x.db?mode=ro",  // unknown parameter
		"sqlite:///tmp/x.db?table=Bad-Name",
		"sqlite:///tmp/x.db?table=a&table=b",
		"sqlite::memory:",
		"postgres://locker:secret@127.0.0.1:15432/locker?table=drop%20table",
		"postgresql://h/locker?password=secret&table=a&table=b",
		"postgres://u:secret@h/locker?sslmode=bogus",
		"mysql://u:secret@h:3306",           // no database
		"mysql://u:secret@h:3306/a/b",       // not a database name
		"mysql://u:secret@h1,h2/db",         // one server only
		"mysql://u:secret@h:99999/db",       // no such port
		"mysql://u:secret@h/db?timeout=x",   // the driver's own parameter, checked
		"mysql://u:secret@h/db?table=a%20b", // not a table name
	} {
		l, err := locker.Open(context.Background(), raw)
		if !errors.Is(err, locker.ErrInvalidURL) {
			t.Errorf("Open(%q) = %v, %v; want ErrInvalidURL", raw, l, err)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) error shows the password: %v", raw, err)
		}
	}
}

func TestOpenUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	// Port 1 on loopback refuses connections.
	_, err := locker.Open(context.Background(), "postgres://locker:secret@127.0.0.1:1/locker?sslmode=disable&connect_timeout=2")
	if !errors.Is(err, locker.ErrUnavailable) {
		t.Errorf("Open of an unreachable server = %v, want ErrUnavailable", err)
	}
	if err != nil && strings.Contains(err.Error(), "secret") {
		t.Errorf("error shows the password: %v", err)
	}
	_, err = locker.Open(context.Background(), "mysql://locker:secret@127.0.0.1:1/locker?timeout=2s")
	if !errors.Is(err, locker.ErrUnavailable) || strings.Contains(err.Error(), "secret") {
		t.Errorf("Open of an unreachable MySQL = %v, want ErrUnavailable without the password", err)
	}
	_, err = locker.Open(context.Background(), "sqlite:///nonexistent-dir-for-locker-test/x.db")
	if !errors.Is(err, locker.ErrUnavailable) || !strings.Contains(err.Error(), "directory /nonexistent-dir-for-locker-test does not exist") {
		t.Errorf("Open of a file in a missing directory = %v, want ErrUnavailable saying so", err)
	}
}

func TestNewOptions(t *testing.T) {
	if _, err := New(nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("New(nil) = %v, want ErrInvalidOption", err)
	}
	if _, err := resolve([]Option{WithTable("x; drop")}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("bad table name = %v, want ErrInvalidOption", err)
	}
}
