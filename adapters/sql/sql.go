package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/wait"
)

// dialect is one database: its statements, and hooks for the rest.
// Adding a database is writing one and naming it in gormDialects.
type dialect struct {
	q         queries
	mq        modeQueries                                   // the modal path's (modes.go)
	txOptions *dbsql.TxOptions                              // the modal path's transactions
	migrate   func(ctx context.Context, tx *dbsql.Tx) error // creates the schema if missing
	classify  func(err error) (transient, ambiguous bool)   // ambiguous: may have been applied
	// setup readies waking: d.hub, and d.poll, d.gate, d.stop as needed.
	setup func(ctx context.Context, d *sqlDriver) error
	// acquireOnce and releaseOnce make one attempt: runAcquire and
	// runRelease, where the database runs q as it is.
	acquireOnce func(ctx context.Context, d *sqlDriver, r *driver.Request) (driver.Grant, error)
	releaseOnce func(ctx context.Context, h *hold) (ok, freed bool, err error)
	// refreshOnce and expireOnce likewise: runRefresh and runExpire
	// unless set.
	refreshOnce func(ctx context.Context, h *hold) (ok bool, err error)
	expireOnce  func(ctx context.Context, h *hold) (deleted bool, err error)
	// refreshBatchOnce is refreshOnce for Exclusive holds of distinct
	// keys, in one statement: runRefreshBatch unless set (refresh_batch.go).
	refreshBatchOnce func(ctx context.Context, d *sqlDriver, hs []*hold) (ok []bool, err error)
	// placeOnce keeps a waiter's place in the queue without claiming the
	// key, where the database queues waiters that also poll (MySQL): a
	// waiter behind another of this process's does no more.
	placeOnce func(ctx context.Context, d *sqlDriver, r *driver.Request) (driver.Grant, error)
	// tick is the step of the database's clock ({now}): a hold's record
	// lapses at the step at or below its grant's moment plus the TTL, so
	// up to a tick before the TTL has run from the call's start (see
	// valid).
	tick time.Duration
	// noLane reports an error of the fast lane's that means it is not to
	// be had (a routine missing, or not this user's to run).
	noLane func(err error) bool
	// prepares: the driver keeps its statements prepared (prepared.go).
	prepares bool
}

var gormDialects = map[string]func(table string) *dialect{"postgres": pgDialect, "sqlite": sqliteDialect, "mysql": myDialect}

// sqlDriver is the driver.Driver (with Notifier, Batcher, BatchRefresher
// and Admin) over a lock table.
type sqlDriver struct {
	*dialect
	db      *dbsql.DB
	closeDB func() // lets go of a database this package opened; nil for New's
	cfg     config
	hub     *wait.Hub
	// poll: no backend notification reaches every waiter (SQLite, MySQL,
	// Postgres without LISTEN), so a process's first waiter for a key also
	// polls, and releases here wake it (see localQueue). Else waiters
	// queue in the database, and a release wakes the first by its token.
	poll bool
	// queued: waiters keep a place in the database's queue, which gives a
	// free key to the first (Postgres; MySQL, whose waiters also poll).
	queued bool
	// batches: AcquireBatch takes a batch in one transaction (SQLite).
	batches bool
	gate    chan struct{} // if set, held around every statement (see fileState)
	prep    *prepared     // the statements prepared, where preparing pays (SQLite); nil elsewhere
	// unprepare lets prep go: the last driver on its database and table
	// closes it.
	unprepare func()
	// immediate: transactions take the database's write lock as they
	// begin (SQLite with _txlock=immediate), so lockKey need not.
	immediate bool
	local     *localQueue // where waiters poll: this process's waiters in order
	// handoffs: the grants that releases handed to this process's
	// waiters (handoff.go): heard by the LISTEN (Postgres), or made by a
	// transaction here (where waiters poll).
	handoffs *handoffs
	// listening reports whether the LISTEN connection is up (Listening).
	listening func() bool
	listenLog *driver.Log   // the LISTEN connection's log (Postgres), else nil
	gates     *gates        // MySQL: wakes waiters here on releases elsewhere
	stop      func()        // ends the dialect's background work (LISTEN, file refs)
	grace     time.Duration // landing's grace, if set (a test's); else landingGrace
	// laneOff: the fast lane (modefast.go) is not to be had here: its
	// routines could not be made, or this user may not run them.
	laneOff atomic.Bool
	// handOffOff: MySQL's hand-off procedure is not to be had here
	// (mysql_handoff.go): releases delete, and waiters look.
	handOffOff atomic.Bool
	// claimOff: MySQL's claim procedure is not to be had here
	// (mysql_claim.go): claims go by their statements.
	claimOff atomic.Bool
	// The Subtree space's driver: the same database, tables named
	// "<table>_tree", opened by openTree on first use (nil in itself).
	treeMu   sync.Mutex
	tree     *sqlDriver
	openTree func(ctx context.Context) (*sqlDriver, error)
}

// KeepsModes: the driver grants by driver.ModeKeeper's rule (modes.go).
func (*sqlDriver) KeepsModes() {}

// New returns a Locker over db, a PostgreSQL or SQLite handle opened by
// gorm (gorm.io/driver/postgres with its default pgx driver, or
// github.com/libtnb/sqlite). It creates the lock table if missing. Close
// leaves db open. db must be a connection pool, not a transaction.
func New(db *gorm.DB, opts ...Option) (locker.Locker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := newDriver(ctx, db, nil, opts...)
	if err != nil {
		return nil, err
	}
	return d.locker(), nil
}

// locker is the portable Locker over d, configured by d's options.
func (d *sqlDriver) locker() locker.Locker { return locker.New(d, locker.WithLogger(d.cfg.logger)) }

// SetLogger implements driver.Logged: the events of the Postgres LISTEN
// connection, which the Lockers of a process on one pool share, go to the
// logger set last. MySQL and SQLite have no such connection to report on.
func (d *sqlDriver) SetLogger(l *slog.Logger) {
	if d.listenLog != nil {
		d.listenLog.SetLogger(l)
	}
}

func newDriver(ctx context.Context, gdb *gorm.DB, closeDB func(), opts ...Option) (*sqlDriver, error) {
	cfg, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	d, err := build(ctx, gdb, closeDB, cfg)
	if err != nil {
		return nil, err
	}
	d.openTree = func(ctx context.Context) (*sqlDriver, error) {
		tc := cfg
		tc.table += "_tree"
		return build(ctx, gdb, nil, tc)
	}
	return d, nil
}

// build opens the driver of cfg's table over gdb.
func build(ctx context.Context, gdb *gorm.DB, closeDB func(), cfg config) (*sqlDriver, error) {
	if gdb == nil {
		return nil, fmt.Errorf("%w: nil *gorm.DB", ErrInvalidOption)
	}
	db, err := gdb.DB()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	name := gdb.Dialector.Name()
	if gormDialects[name] == nil {
		return nil, fmt.Errorf("%w: gorm dialect %q: want postgres, mysql or sqlite", ErrInvalidOption, name)
	}
	d := &sqlDriver{dialect: gormDialects[name](cfg.table), db: db, closeDB: closeDB, cfg: cfg, stop: func() {}}
	if d.refreshOnce == nil {
		d.refreshOnce, d.expireOnce = runRefresh, runExpire
	}
	if d.refreshBatchOnce == nil {
		d.refreshBatchOnce = runRefreshBatch
	}
	if err = d.setup(ctx, d); err == nil {
		if d.handsOffHere() {
			d.handoffs = &d.local.handed
		}
		err = d.retry(ctx, d.migrateTx, nil)
	}
	if err == nil && d.prepares {
		d.prep, d.unprepare, err = prepareShared(ctx, db, d)
	}
	d.immediate = name == "sqlite" && beginsImmediate(gdb.Dialector)
	if err != nil {
		_ = d.Close(ctx)
		return nil, err
	}
	return d, nil
}

// migrateTx creates the schema, if missing, in one transaction.
func (d *sqlDriver) migrateTx(ctx context.Context) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := d.migrate(ctx, tx); err != nil {
		return err
	}
	return tx.Commit()
}

// Close releases the driver's connections (and lets go of the database
// handle, if this package opened it).
func (d *sqlDriver) Close(ctx context.Context) error {
	d.treeMu.Lock()
	if d.tree != nil {
		_ = d.tree.Close(ctx)
	}
	d.treeMu.Unlock()
	d.stop()
	if d.unprepare != nil {
		d.unprepare()
	}
	if d.closeDB != nil {
		d.closeDB()
	}
	return nil
}

// DefaultTable is the lock table's name unless WithTable says otherwise.
const DefaultTable = "locker_locks"

// DefaultRetryTimeout bounds the retries of transient errors when the
// caller's context has no earlier deadline.
const DefaultRetryTimeout = 5 * time.Second

// Option configures New.
type Option func(*config)

type config struct {
	table        string
	retryTimeout time.Duration
	logger       *slog.Logger
}

// WithTable sets the lock table's name (default locker_locks): lower-case
// letters, digits and underscores, starting with a letter or underscore, at
// most 48 bytes (the fence sequence and notification channel derive their
// names from it). Tables are independent lock namespaces.
func WithTable(name string) Option { return func(c *config) { c.table = name } }

// WithRetryTimeout sets how long transient errors are retried when the
// caller's context allows longer (default 5s); 0 or less disables retries.
func WithRetryTimeout(d time.Duration) Option { return func(c *config) { c.retryTimeout = d } }

// WithLogger has the Locker log its rare events to l, as locker.WithLogger
// does for Open: here also Postgres's LISTEN connection lost and made
// again (Info).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

func resolve(opts []Option) (config, error) {
	c := config{table: DefaultTable, retryTimeout: DefaultRetryTimeout}
	for _, o := range opts {
		o(&c)
	}
	if !tableName.MatchString(c.table) {
		return config{}, fmt.Errorf("%w: table name %q: want [a-z_][a-z0-9_]*, at most 48 bytes", ErrInvalidOption, c.table)
	}
	return c, nil
}

// ErrInvalidOption reports a bad option given to New. From a URL parameter
// it also matches locker.ErrInvalidURL.
var ErrInvalidOption = errors.New("locker/sql: invalid option")
