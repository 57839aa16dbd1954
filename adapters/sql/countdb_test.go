package sql

import (
	"context"
	dbsql "database/sql"
	sqldriver "database/sql/driver"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
	gsqlite "github.com/libtnb/sqlite"
	gmysql "gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	gosqlite "modernc.org/sqlite"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// countingLockers opens a Locker on each database (Postgres, MariaDB, a
// fresh SQLite file) whose connections count the statements they are
// sent: each Exec or Query, in a transaction or not, is one.
func countingLockers(t *testing.T) map[string]counted {
	t.Helper()
	ls := map[string]counted{}
	for name, raw := range map[string]string{
		"postgres": testenv.URL(t, "LOCKER_TEST_POSTGRES").String(),
		"mysql":    testenv.URL(t, "LOCKER_TEST_MYSQL").String(),
		"sqlite":   "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "count.db")),
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		ls[name] = openCounting(t, u)
	}
	return ls
}

// counted is a Locker with the count of the statements it sent.
type counted struct {
	locker.Locker
	n *atomic.Int64
}

// openCounting opens u's database as Open does, on a counting handle.
// (Not pgx's own connections: a Postgres Locker then polls, which no test
// of keep-alive minds.)
func openCounting(t *testing.T, u *url.URL) counted {
	t.Helper()
	_, dsn, opts, err := dialector(u)
	if err != nil {
		t.Fatal(err)
	}
	c := &countConnector{dsn: dsn, n: new(atomic.Int64)}
	db := dbsql.OpenDB(c)
	var gd gorm.Dialector
	switch u.Scheme {
	case "postgres":
		c.drv, gd = stdlib.GetDefaultDriver(), postgres.New(postgres.Config{Conn: db})
	case "mysql":
		c.drv, gd = &mysql.MySQLDriver{}, gmysql.New(gmysql.Config{Conn: db})
	default:
		c.drv, gd = &gosqlite.Driver{}, &gsqlite.Dialector{Conn: db}
	}
	gdb, err := gorm.Open(gd, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := newDriver(ctx, gdb, func() { _ = db.Close() }, opts...)
	if err != nil {
		t.Fatal(err)
	}
	l := locker.New(d)
	t.Cleanup(func() { _ = l.Close() })
	return counted{l, c.n}
}

// countConnector opens drv's connections to dsn, counting their statements.
type countConnector struct {
	drv sqldriver.Driver
	dsn string
	n   *atomic.Int64
}

func (c *countConnector) Connect(context.Context) (sqldriver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &countConn{Conn: conn, n: c.n}, nil
}

func (c *countConnector) Driver() sqldriver.Driver { return c.drv }

// countConn counts the statements sent through it, and passes every call
// on (driver.ErrSkip where the connection lacks the call: database/sql
// then takes its general path).
type countConn struct {
	sqldriver.Conn
	n *atomic.Int64
}

func (c *countConn) ExecContext(ctx context.Context, q string, args []sqldriver.NamedValue) (sqldriver.Result, error) {
	c.n.Add(1)
	if e, ok := c.Conn.(sqldriver.ExecerContext); ok {
		return e.ExecContext(ctx, q, args)
	}
	return nil, sqldriver.ErrSkip
}

func (c *countConn) QueryContext(ctx context.Context, q string, args []sqldriver.NamedValue) (sqldriver.Rows, error) {
	c.n.Add(1)
	if e, ok := c.Conn.(sqldriver.QueryerContext); ok {
		return e.QueryContext(ctx, q, args)
	}
	return nil, sqldriver.ErrSkip
}

func (c *countConn) PrepareContext(ctx context.Context, q string) (sqldriver.Stmt, error) {
	if p, ok := c.Conn.(sqldriver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, q)
	}
	return c.Prepare(q)
}

func (c *countConn) BeginTx(ctx context.Context, opts sqldriver.TxOptions) (sqldriver.Tx, error) {
	if b, ok := c.Conn.(sqldriver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return c.Begin() //nolint:staticcheck // the connection has nothing newer
}

func (c *countConn) CheckNamedValue(v *sqldriver.NamedValue) error {
	if ch, ok := c.Conn.(sqldriver.NamedValueChecker); ok {
		return ch.CheckNamedValue(v)
	}
	return sqldriver.ErrSkip
}

func (c *countConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(sqldriver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *countConn) IsValid() bool {
	v, ok := c.Conn.(sqldriver.Validator)
	return !ok || v.IsValid()
}

func (c *countConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(sqldriver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}
