package sql

import (
	"context"
	"crypto/rand"
	dbsql "database/sql"
	"errors"
	"fmt"
	"sync"
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
	// id names the hold this attempt adds: a same-owner row that has it
	// already is not changed, so a retry after a lost reply adds nothing.
	// token is a waiting Lock's place in the key's queue ("" for none),
	// which a failed attempt takes or keeps, and a successful one leaves.
	acquire(ctx context.Context, db *dbsql.DB, key, owner, id, token string, ttl time.Duration) (fence uint64, held bool, remaining time.Duration, err error)
	// leave takes token out of key's queue and, if the key is free, wakes
	// the next waiter.
	leave(ctx context.Context, db *dbsql.DB, key, token string) error
	// refresh extends the row if it is still this lease's.
	refresh(ctx context.Context, db *dbsql.DB, key, owner, id string, fence uint64, ttl time.Duration) (bool, error)
	// release takes hold id off the row if the row is this lease's,
	// deleting it with its last hold; freed reports that the row was
	// deleted (and, on Postgres, waiters notified). A hold already taken
	// off is not there to take again: a retry never drops another hold.
	release(ctx context.Context, db *dbsql.DB, key, owner, id string, fence uint64) (ok, freed bool, err error)
	// abandon takes hold id off key's row of owner, whatever its fence: the
	// undo of an acquire that may have landed after its caller gave up.
	abandon(ctx context.Context, db *dbsql.DB, key, owner, id string) (freed bool, err error)
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
	// undo counts abandon calls under way; Close waits for them.
	undo sync.WaitGroup
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

// Lock blocks until key is held or ctx ends. Its first attempt does not
// queue, so an uncontended Lock writes no queue entry; later ones, made
// once listening, take a place in the key's queue (Postgres).
func (l *sqlLocker) Lock(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	ctx, o, end, err := l.set.Begin(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	defer end()
	// token is our place in the queue once we listen (queued).
	token, queued := rand.Text(), false
	backoff := pollMin
	attempt := func(ctx context.Context) (locker.Lease, time.Duration, error) {
		t := ""
		if queued {
			t = token
		}
		lease, remaining, err := l.attempt(ctx, key, t, o)
		if !errors.Is(err, locker.ErrLocked) {
			return lease, remaining, err
		}
		// remaining 0: the key came free with nobody ahead (a release that
		// raced our queueing, its NOTIFY missed): look again at once.
		if t != "" && remaining > o.TTL/3 {
			remaining = o.TTL / 3 // look again in time to keep our place
		}
		if l.poll {
			if remaining <= 0 || remaining > backoff {
				remaining = backoff
			}
			backoff = min(2*backoff, pollMax)
		}
		return lease, remaining, err
	}
	lease, err := wait.Until(ctx, key, attempt, func(ctx context.Context) (<-chan struct{}, func(), error) {
		if l.poll {
			return l.hub.Subscribe(ctx, key)
		}
		queued = true                      // from now on, even if Subscribe fails: leave below
		return l.hub.Subscribe(ctx, token) // the release wakes the first waiter by its token
	})
	if err != nil && queued {
		// Leave the queue now, so a Lock that gives up delays no one.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(l.cfg.retryTimeout, time.Second))
		defer cancel()
		_ = l.retry(ctx, func(ctx context.Context) error { return l.d.leave(ctx, l.db, key, token) }, nil)
	}
	return lease, err
}

// Backoff of a waiter that no notification may reach (SQLite across
// processes): short, since polling a local file is cheap, and bounded.
const (
	pollMin = 2 * time.Millisecond
	pollMax = 50 * time.Millisecond
)

// TryLock makes one attempt and returns ErrLocked if another owner holds key.
func (l *sqlLocker) TryLock(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	ctx, o, end, err := l.set.Begin(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	defer end()
	lease, _, err := l.attempt(ctx, key, "", o)
	return lease, wait.CtxErr(ctx, key, err)
}

// attempt runs the acquire statement once (retrying transient errors) and
// wraps a success in a lease.
func (l *sqlLocker) attempt(ctx context.Context, key, token string, o locker.Options) (locker.Lease, time.Duration, error) {
	// The hold's id: the same through this attempt's retries, so a retry
	// after a lost reply finds its hold already there.
	id := rand.Text()
	start := time.Now()
	var (
		fence     uint64
		held      bool
		remaining time.Duration
		ambiguous bool
	)
	err := l.retry(ctx, func(ctx context.Context) (err error) {
		fence, held, remaining, err = l.d.acquire(ctx, l.db, key, o.Owner, id, token, o.TTL)
		return err
	}, &ambiguous)
	if err != nil {
		if ambiguous {
			l.abandon(ctx, key, o.Owner, id)
		}
		return nil, 0, err
	}
	if !held {
		return nil, remaining, fmt.Errorf("%w: %q", locker.ErrLocked, key)
	}
	ls, err := lease.New(l.set, lease.Config{
		Key: key, Owner: o.Owner, Fence: fence, TTL: o.TTL, KeepAlive: o.KeepAlive,
		Start: start,
		Ops:   &ops{l: l, key: key, owner: o.Owner, id: id, fence: fence, ttl: o.TTL},
	})
	if err != nil {
		// Closed meanwhile: the hold must not outlive the Locker.
		l.abandon(ctx, key, o.Owner, id)
		return nil, 0, err
	}
	return ls, 0, nil
}

// abandon takes hold id back in the background, after an acquire that
// failed (or was cancelled) in a way that may have landed: else the row
// would keep the key until its TTL. The hold id makes this safe for a
// WithOwner identity too: its other holds, even ones granted meanwhile, are
// not touched. It runs under its own deadline, since ctx has likely ended.
func (l *sqlLocker) abandon(ctx context.Context, key, owner, id string) {
	d := l.d
	l.undo.Add(1)
	go func() {
		defer l.undo.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(l.cfg.retryTimeout, time.Second))
		defer cancel()
		var freed bool
		err := l.retry(ctx, func(ctx context.Context) (err error) {
			freed, err = d.abandon(ctx, l.db, key, owner, id)
			return err
		}, nil)
		if err == nil && freed && l.poll {
			l.hub.Notify(key)
		}
	}()
}

// Close unlocks held leases best-effort and releases the Locker's
// connections (the database handle too, if this package opened it).
func (l *sqlLocker) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.set.Close(ctx); err != nil {
		return err
	}
	l.undo.Wait()
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
