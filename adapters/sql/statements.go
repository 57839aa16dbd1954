package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"time"
)

// queries is a dialect's SQL. Both dialects' statements take the same
// arguments (SQLite ignores those it does not use) and return the same
// columns, so the same Go runs either. Where a statement deletes a row,
// Postgres also wakes the key's first live waiter, and a column counts it.
type queries struct {
	// acquire ($1 key, $2 owner, $3 TTL ms, $4 hold id, $5 token) returns
	// the fence if the key is now held, else no row. A live row of the same
	// owner gains hold id unless it has it already (a retry of this very
	// call); acquireQueued also takes, keeps or leaves the waiter's place.
	acquire, acquireQueued string
	// wait ($1 key, $2 token) is the ms a refused waiter may wait; 0 if the
	// key came free meanwhile.
	wait string
	// leave ($1 key, $2 token) takes a waiter out of the queue and, if the
	// key is free, wakes the next one (Postgres only).
	leave string
	// refresh ($1 key, $2 owner, $3 fence, $4 hold id, $5 TTL ms) extends
	// the row if it still has the hold: a row if so.
	refresh string
	// release ($1 key, $2 owner, $3 fence or 0 for any, $4 hold id) takes
	// the hold off the row, deleting the row with its last hold. It
	// returns (deleted, decremented, notified, exists): exists tells a lost
	// race (the hold is still there) from a hold that is not.
	release string
	// expire ($1 key, $2 owner, $3 fence) deletes the row if it has
	// expired: (deleted, notified). force ($1 key) deletes it whatever
	// holds it: (it was live, notified).
	expire, force string
	// info selects key, owner, fence, holds, expiry in Unix ms of the live
	// rows, ready for "AND <cond>"; prefix is the condition "key begins
	// with $1".
	info, prefix string
}

// statements runs a dialect's acquire and release.
type statements struct{ sql queries }

func (s *statements) acquire(ctx context.Context, db *dbsql.DB, key, owner, id, token string, ttl time.Duration) (uint64, bool, time.Duration, error) {
	q := s.sql.acquire
	if token != "" {
		q = s.sql.acquireQueued
	}
	var fence uint64
	err := db.QueryRowContext(ctx, q, key, owner, ttl.Milliseconds(), id, token).Scan(&fence)
	if !errors.Is(err, dbsql.ErrNoRows) {
		return fence, err == nil, 0, err
	}
	// Refused. The refused upsert cannot return the holder's row, so a
	// second, read-only statement asks how long to wait.
	var ms int64
	err = db.QueryRowContext(ctx, s.sql.wait, key, token).Scan(&ms)
	return 0, false, time.Duration(ms) * time.Millisecond, err
}

func (s *statements) release(ctx context.Context, db *dbsql.DB, key, owner, id string, fence uint64) (ok, freed bool, err error) {
	var (
		deleted, decremented, notified int
		exists                         bool
	)
	err = row(db.QueryRowContext(ctx, s.sql.release, key, owner, int64(fence), id), &deleted, &decremented, &notified, &exists)
	if err == nil && deleted+decremented == 0 && exists {
		err = errRace
	}
	return deleted+decremented > 0, deleted > 0, err
}

// row runs q (retrying transient errors) and scans its row into dest,
// left as it is if there is no row.
func (d *sqlDriver) row(ctx context.Context, q string, args []any, dest ...any) error {
	return d.retry(ctx, func(ctx context.Context) error {
		return row(d.db.QueryRowContext(ctx, q, args...), dest...)
	}, nil)
}

func row(r *dbsql.Row, dest ...any) error {
	if err := r.Scan(dest...); !errors.Is(err, dbsql.ErrNoRows) {
		return err
	}
	return nil
}

// execAll runs stmts in tx, up to the first that fails.
func execAll(ctx context.Context, tx *dbsql.Tx, stmts ...string) error {
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return nil
}
