package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/lease"
	"github.com/locker-go/locker/internal/wait"
)

// dialect is what differs between Postgres and SQLite: the SQL, how
// waiters are woken, and which errors are worth retrying.
type dialect interface {
	migrate(ctx context.Context, db *dbsql.DB) error
	// acquire makes one attempt. If key is held by another owner, held is
	// false and remaining is the holder's time left (<= 0 if unknown).
	// inc is the hold count a same-owner row gains: 1 for WithOwner
	// re-entry, 0 for a random owner (whose same-owner row can only be its
	// own earlier attempt, so a retry stays idempotent).
	acquire(ctx context.Context, db *dbsql.DB, key, owner string, ttl time.Duration, inc int) (fence uint64, held bool, remaining time.Duration, err error)
	// refresh extends the row if it is still this lease's.
	refresh(ctx context.Context, db *dbsql.DB, key, owner string, fence uint64, ttl time.Duration) (bool, error)
	// release drops one hold if the row is this lease's; freed reports that
	// the row was deleted (and, on Postgres, waiters notified).
	release(ctx context.Context, db *dbsql.DB, key, owner string, fence uint64) (ok, freed bool, err error)
	// expire deletes the row if it is this lease's and has expired.
	expire(ctx context.Context, db *dbsql.DB, key, owner string, fence uint64) (freed bool, err error)
	// forceUnlock deletes key's row, reporting whether it was live.
	forceUnlock(ctx context.Context, db *dbsql.DB, key string) (held bool, err error)
	// info is a SELECT of key, owner, fence, holds, expiry in Unix ms over
	// the live rows, ready for "AND <cond>"; prefix is the condition
	// "key begins with $1".
	info() (query, prefix string)
	// classify tells whether err is worth retrying, and whether the failed
	// statement may nevertheless have been applied.
	classify(err error) (transient, ambiguous bool)
}

// sqlLocker implements locker.Locker and locker.Admin over a lock table.
type sqlLocker struct {
	db    *dbsql.DB
	owned bool // opened by this package: closed by Close
	d     dialect
	cfg   config
	set   *lease.Set
	hub   *wait.Hub
	// poll is true when no backend notification reaches every waiter (SQLite):
	// waiters also wake on a short backoff.
	poll bool
	// gate, when set, is held around every statement (see fileState).
	gate chan struct{}
	// stop ends what the dialect runs in the background (LISTEN, file refs).
	stop func()
}

var (
	_ locker.Locker = (*sqlLocker)(nil)
	_ locker.Admin  = (*sqlLocker)(nil)
)

// New returns a Locker over db, a PostgreSQL or SQLite handle opened by
// gorm (gorm.io/driver/postgres with its default pgx driver, or
// github.com/glebarez/sqlite). It creates the lock table if missing. Close
// leaves db open. db must be a connection pool, not a transaction.
func New(db *gorm.DB, opts ...Option) (locker.Locker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return newLocker(ctx, db, false, opts...)
}

func newLocker(ctx context.Context, gdb *gorm.DB, owned bool, opts ...Option) (locker.Locker, error) {
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
	l := &sqlLocker{db: db, owned: owned, cfg: cfg, set: lease.NewSet(), stop: func() {}}
	switch name := gdb.Dialector.Name(); name {
	case "postgres":
		err = l.initPostgres(ctx)
	case "sqlite":
		err = l.initSQLite(ctx)
	default:
		return nil, fmt.Errorf("%w: gorm dialect %q: want postgres or sqlite", ErrInvalidOption, name)
	}
	if err == nil {
		err = l.retry(ctx, func(ctx context.Context) error { return l.d.migrate(ctx, db) }, nil)
	}
	if err != nil {
		l.stop()
		return nil, err
	}
	return l, nil
}

// Lock blocks until key is held or ctx ends.
func (l *sqlLocker) Lock(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	o, end, err := l.set.Begin(key, opts)
	if err != nil {
		return nil, err
	}
	defer end()
	ctx, stop := l.set.Context(ctx)
	defer stop()
	backoff := pollMin
	attempt := func(ctx context.Context) (locker.Lease, time.Duration, error) {
		lease, remaining, err := l.attempt(ctx, key, o)
		if l.poll && errors.Is(err, locker.ErrLocked) {
			if remaining <= 0 || remaining > backoff {
				remaining = backoff
			}
			backoff = min(2*backoff, pollMax)
		}
		return lease, remaining, err
	}
	return wait.Until(ctx, key, attempt, func(ctx context.Context) (<-chan struct{}, func(), error) {
		return l.hub.Subscribe(ctx, key)
	})
}

// Backoff of a waiter that no notification may reach (SQLite across
// processes): short, since polling a local file is cheap, and bounded.
const (
	pollMin = 2 * time.Millisecond
	pollMax = 50 * time.Millisecond
)

// TryLock makes one attempt and returns ErrLocked if another owner holds key.
func (l *sqlLocker) TryLock(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	o, end, err := l.set.Begin(key, opts)
	if err != nil {
		return nil, err
	}
	defer end()
	ctx, stop := l.set.Context(ctx)
	defer stop()
	lease, _, err := l.attempt(ctx, key, o)
	return lease, wait.CtxErr(ctx, key, err)
}

// attempt runs the acquire statement once (retrying transient errors) and
// wraps a success in a lease.
func (l *sqlLocker) attempt(ctx context.Context, key string, o locker.Options) (locker.Lease, time.Duration, error) {
	inc := 0
	if o.StableOwner {
		inc = 1
	}
	start := time.Now()
	var (
		fence     uint64
		held      bool
		remaining time.Duration
	)
	err := l.retry(ctx, func(ctx context.Context) (err error) {
		fence, held, remaining, err = l.d.acquire(ctx, l.db, key, o.Owner, o.TTL, inc)
		return err
	}, nil)
	if err != nil {
		return nil, 0, err
	}
	if !held {
		return nil, remaining, fmt.Errorf("%w: %q", locker.ErrLocked, key)
	}
	ls, err := lease.New(l.set, lease.Config{
		Key: key, Owner: o.Owner, Fence: fence, TTL: o.TTL, KeepAlive: o.KeepAlive,
		Start: start,
		Ops:   &ops{l: l, key: key, owner: o.Owner, fence: fence, ttl: o.TTL},
	})
	if err != nil {
		return nil, 0, err
	}
	return ls, 0, nil
}

// Close unlocks held leases best-effort and releases the Locker's
// connections (the database handle too, if this package opened it).
func (l *sqlLocker) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.set.Close(ctx); err != nil {
		return err
	}
	l.stop()
	if l.owned {
		return l.db.Close()
	}
	return nil
}

// crash makes the Locker vanish as a killed process would, for tests: its
// connections close without unlocking, so its leases' keep-alives fail
// and their rows lapse by their TTL.
func (l *sqlLocker) crash() {
	l.stop()
	_ = l.db.Close()
}
