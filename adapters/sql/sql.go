package sql

import (
	"context"
	dbsql "database/sql"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/wait"
)

// dialect is what differs between Postgres and SQLite: the schema, the
// statements (their text, and statements runs acquire and release), and
// which errors are worth retrying.
type dialect interface {
	migrate(ctx context.Context, tx *dbsql.Tx) error // creates the schema
	// acquire makes one attempt; remaining is the time a refused Lock may
	// wait (<= 0 if unknown). token is a waiting Lock's place in the key's
	// queue ("" for none). id names the hold this attempt adds.
	acquire(ctx context.Context, db *dbsql.DB, key, owner, id, token string, ttl time.Duration) (fence uint64, held bool, remaining time.Duration, err error)
	// release takes hold id off the row with fence (any, if 0); freed: the
	// row went with it. A hold already taken off is not there to take
	// again: a retry never drops another hold.
	release(ctx context.Context, db *dbsql.DB, key, owner, id string, fence uint64) (ok, freed bool, err error)
	// classify tells whether err is worth retrying, and whether the failed
	// statement may nevertheless have been applied.
	classify(err error) (transient, ambiguous bool)
}

// sqlDriver is the driver.Driver (with Notifier and Admin) over a lock table.
type sqlDriver struct {
	db    *dbsql.DB
	owned bool // opened by this package: closed by Close
	d     dialect
	q     queries // d's statements
	cfg   config
	hub   *wait.Hub
	// poll is true when no backend notification reaches every waiter
	// (SQLite, Postgres without LISTEN): waiters also wake on a short
	// backoff, and releases wake the key's waiters of this process. Else
	// waiters queue in the database and the release wakes the first one by
	// its token (Postgres with LISTEN).
	poll bool
	// gate, when set, is held around every statement (see fileState).
	gate chan struct{}
	// stop ends what the dialect runs in the background (LISTEN, file refs).
	stop func()
}

// New returns a Locker over db, a PostgreSQL or SQLite handle opened by
// gorm (gorm.io/driver/postgres with its default pgx driver, or
// github.com/glebarez/sqlite). It creates the lock table if missing. Close
// leaves db open. db must be a connection pool, not a transaction.
func New(db *gorm.DB, opts ...Option) (locker.Locker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := newDriver(ctx, db, false, opts...)
	if err != nil {
		return nil, err
	}
	return wrap(d), nil
}

func newDriver(ctx context.Context, gdb *gorm.DB, owned bool, opts ...Option) (*sqlDriver, error) {
	cfg, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	if gdb == nil {
		return nil, fmt.Errorf("%w: nil *gorm.DB", ErrInvalidOption)
	}
	db, err := gdb.DB()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	d := &sqlDriver{db: db, owned: owned, cfg: cfg, stop: func() {}}
	switch name := gdb.Dialector.Name(); name {
	case "postgres":
		err = d.initPostgres(ctx)
	case "sqlite":
		err = d.initSQLite(ctx)
	default:
		return nil, fmt.Errorf("%w: gorm dialect %q: want postgres or sqlite", ErrInvalidOption, name)
	}
	if err == nil {
		err = d.retry(ctx, d.migrate, nil)
	}
	if err != nil {
		d.stop()
		return nil, err
	}
	return d, nil
}

// migrate creates the schema, if missing, in one transaction.
func (d *sqlDriver) migrate(ctx context.Context) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := d.d.migrate(ctx, tx); err != nil {
		return err
	}
	return tx.Commit()
}

// opened, when set (by this package's tests), learns every Locker made
// here along with its driver.
var opened func(locker.Locker, *sqlDriver)

// wrap returns the portable Locker over d.
func wrap(d *sqlDriver) locker.Locker {
	l := locker.New(d)
	if opened != nil {
		opened(l, d)
	}
	return l
}

// Close releases the driver's connections (the database handle too, if
// this package opened it).
func (d *sqlDriver) Close(context.Context) error {
	d.stop()
	if d.owned {
		return d.db.Close()
	}
	return nil
}
