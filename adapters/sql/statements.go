package sql

import (
	"cmp"
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/backoff"
)

// queries is a dialect's SQL. Every dialect's statements take the same
// arguments and return the same columns, so the same Go runs them all.
// Postgres also wakes the key's first live waiter where a statement frees
// the key, counted in a column.
type queries struct {
	// acquire ($1 key, $2 owner, $3 TTL ms, $4 hold id, $5 token) returns
	// the fence if the key is now held, else no row; acquireQueued also
	// takes, keeps or leaves the waiter's place.
	acquire, acquireQueued string
	// wait ($1 key, $2 token): the ms a refused waiter may wait, 0 if the
	// key came free meanwhile, and whether Limited holders hold the key
	// (limitWait). leave ($1 key, $2 token): take a waiter out
	// of the queue, and if the key is free wake the next (Postgres only).
	wait, leave string
	// refresh ($1 key, $2 owner, $3 fence, $4 hold id, $5 TTL ms) extends
	// the row if it still has the hold: a row if so. refreshBatch ($1 the
	// holds in JSON) does it for holds of distinct keys, returning the key
	// of each row extended (refresh_batch.go).
	refresh, refreshBatch string
	// release ($1 key, $2 owner, $3 fence or 0 for any, $4 hold id) takes
	// the hold off the row, deleting the row with its last hold: (deleted,
	// decremented, notified, exists), exists telling a lost race (the hold
	// is still there) from a hold that is not.
	release string
	// expire ($1 key, $2 owner, $3 fence) deletes the row if it has expired:
	// (deleted, notified).
	expire string
	// releaseLane and expireLane, if any, are release and expire in a
	// routine of the schema that takes the key's lock first, so that the
	// waiters they wake include every place committed before them
	// (Postgres: one statement reads the queue as of its start); release
	// and expire serve where the lane is off.
	releaseLane, expireLane string
	// status ($1 key) and list ($1 key prefix) select key, owner, fence,
	// holds, expiry in Unix ms of the live rows.
	status, list string
	// raise ($1 floor) raises the table's fence counter to the floor
	// (floor.go).
	raise string
}

// upsert is acquire's conflict clause: a live row of the same owner is
// re-entered, gaining the hold id unless it has it (a retry of this very
// call); an expired one is taken over: new owner, fence, one hold.
const upsert = `ON CONFLICT ("key") DO UPDATE SET
	fence = CASE WHEN {mine} THEN l.fence ELSE excluded.fence END,
	holds = CASE WHEN {mine} THEN l.holds + ({pos}(l.ids, excluded.ids) = 0){int} ELSE 1 END,
	ids = CASE WHEN {mine} THEN
		CASE WHEN {pos}(l.ids, excluded.ids) = 0 THEN l.ids || substr(excluded.ids, 2) ELSE l.ids END ELSE excluded.ids END,
	expires_at = CASE WHEN {mine} THEN {max}(l.expires_at, excluded.expires_at) ELSE excluded.expires_at END,
	owner = excluded.owner`

const refresh = `UPDATE {t} SET expires_at = {max}(expires_at, {now} + $5{ms})
WHERE "key" = $1 AND owner = $2 AND fence = $3 AND {pos}(ids, {id}) > 0 RETURNING 1`

// filler fills in a dialect's statements: the table ({t} quoted, {tn}
// bare), the parts above, and the dialect's pairs ({now}; {ms}: from ms to
// the expiry's unit; {pos}, {int}, {max}; {id}: $4 spaced as in ids), until
// none is left, since parts hold names themselves.
func filler(table string, pairs ...string) func(string) string {
	r := strings.NewReplacer(append(pairs, "{t}", `"{tn}"`, "{tn}", table, "{upsert}", upsert,
		"{mine}", "l.owner = excluded.owner AND l.expires_at > {now}")...)
	return func(s string) string {
		for t := r.Replace(s); t != s; t = r.Replace(s) {
			s = t
		}
		return s
	}
}

// byKey and byPrefix complete an info statement (the live rows) into
// status and list.
const (
	byKey    = ` AND "key" = $1`
	byPrefix = ` AND substr("key", 1, length($1)) = $1`
)

// runAcquire is one attempt of q.acquire.
func runAcquire(ctx context.Context, d *sqlDriver, r *driver.Request) (driver.Grant, error) {
	q, token := d.q.acquire, d.token(r)
	if token != "" {
		q = d.q.acquireQueued
	}
	var fence uint64
	switch err := d.pool().QueryRowContext(ctx, q, r.Key, r.Owner, r.TTL.Milliseconds(), r.ID, token).Scan(&fence); {
	case err == nil:
		h := (&hold{d: d, key: r.Key, owner: r.Owner, id: r.ID, fence: fence, ttl: r.TTL}).written()
		return driver.Grant{Hold: h, Fence: fence}, nil
	case !errors.Is(err, dbsql.ErrNoRows):
		return driver.Grant{}, err
	}
	// Refused. The refused upsert cannot return the holder's row, so a
	// second, read-only statement asks how long to wait, and whether the
	// holders are Limited ones (a mismatch, driver.Limiter's rule 2).
	var (
		ms      int64
		limited bool
	)
	if err := d.pool().QueryRowContext(ctx, d.q.wait, r.Key, token).Scan(&ms, &limited); err != nil || limited {
		return driver.Grant{}, cmp.Or(err, limitedHeld(r, 0))
	}
	return driver.Grant{Retry: time.Duration(ms) * time.Millisecond}, nil
}

// runRelease is one attempt of q.release.
// Its third column is what it handed over: the statements' count of
// waiters woken, Postgres's function's grants ("token fence,…"), which
// go to this process's waiters at once (handedHere).
func runRelease(ctx context.Context, h *hold) (ok, freed bool, err error) {
	var (
		deleted, decremented int
		granted              string
		exists               bool
	)
	q, lane := h.d.lane(h.d.q.release, h.d.q.releaseLane)
	err = row(h.d.pool().QueryRowContext(ctx, q, h.key, h.owner, int64(h.fence), h.id), &deleted, &decremented, &granted, &exists)
	if lane && err != nil && h.d.offLane(err) == nil {
		return runRelease(ctx, h) // the lane is off now: the statement
	}
	if err == nil && deleted+decremented == 0 && exists {
		err = errRace
	}
	if err == nil && lane {
		h.d.handedHere(granted)
	}
	return deleted+decremented > 0, deleted > 0, err
}

// runRefresh is one attempt of q.refresh.
func runRefresh(ctx context.Context, h *hold) (ok bool, err error) {
	err = row(h.d.pool().QueryRowContext(ctx, h.d.q.refresh, h.key, h.owner, int64(h.fence), h.id, h.ttl.Milliseconds()), &ok)
	return ok, err
}

// runExpire is one attempt of q.expire.
func runExpire(ctx context.Context, h *hold) (deleted bool, err error) {
	var n, notified int
	q, lane := h.d.lane(h.d.q.expire, h.d.q.expireLane)
	err = row(h.d.pool().QueryRowContext(ctx, q, h.key, h.owner, int64(h.fence)), &n, &notified)
	if lane && err != nil && h.d.offLane(err) == nil {
		return runExpire(ctx, h) // the lane is off now: the statement
	}
	return n > 0, err
}

// lane returns routine, and true, where there is one and the lane is on;
// else statement.
func (d *sqlDriver) lane(statement, routine string) (string, bool) {
	if routine == "" || d.laneOff.Load() {
		return statement, false
	}
	return routine, true
}

// row runs q (retrying transient errors) and scans its row into dest,
// left as it is if there is no row.
func (d *sqlDriver) row(ctx context.Context, q string, args []any, dest ...any) error {
	return d.retry(ctx, func(ctx context.Context) error {
		return row(d.pool().QueryRowContext(ctx, q, args...), dest...)
	}, nil)
}

func row(r *dbsql.Row, dest ...any) error {
	if err := r.Scan(dest...); !errors.Is(err, dbsql.ErrNoRows) {
		return err
	}
	return nil
}

// errRace is returned by a statement that lost a race it can retry at once
// (see pgRelease); it is transient and was not applied.
var errRace = errors.New("locker/sql: concurrent change, retrying")

// retry runs op, holding the process's gate to the database if any, as
// retry does with the dialect's classify.
func (d *sqlDriver) retry(ctx context.Context, op func(context.Context) error, ambiguous *bool) error {
	return retry(ctx, d.cfg.retryTimeout, d.classify, func(ctx context.Context) error {
		if d.gate != nil {
			select {
			case d.gate <- struct{}{}:
				defer func() { <-d.gate }()
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return op(ctx)
	}, ambiguous)
}

// landingGrace is how long a statement in flight when its caller gives up
// is still waited for (landing).
const landingGrace = time.Second

// landing is the context of a statement whose effect (a place in the
// queue, a claim) a failed call's Abandon undoes: one in flight when ctx
// ends is given grace more. Cut off as its caller gives up, it may yet
// be applied by the server, after Abandon's undo ran on another
// connection, and so stay: a place that keeps every other waiter out
// until it lapses, a hold nobody has. Answered, it has landed, and the
// undo comes after it; a backend that answers not even then is cut off as
// before. A statement begun after ctx ended gets no grace. stop ends the
// context.
func landing(ctx context.Context, grace time.Duration) (_ context.Context, stop func()) {
	if ctx.Err() != nil {
		return ctx, func() {}
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu      sync.Mutex
		timer   *time.Timer
		stopped bool
	)
	after := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer = time.AfterFunc(grace, cancel)
		}
	})
	return lctx, func() {
		after()
		mu.Lock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// retry runs op, and again after transient errors, with backoff, until
// ctx's deadline or timeout. It reports through *ambiguous (if not nil)
// whether a failed try may have been applied (so does a try cut short by
// the end of ctx). Errors wrap locker.ErrUnavailable, or ctx.Err() once
// ctx has ended; an error matching locker.ErrModeMismatch (a modal
// rule's refusal, which changed nothing) is returned at once, as it is.
func retry(ctx context.Context, timeout time.Duration, classify func(error) (transient, ambiguous bool), op func(context.Context) error, ambiguous *bool) error {
	if ambiguous == nil {
		ambiguous = new(bool)
	}
	var err error
	p := backoff.Policy{Min: time.Millisecond, Max: 200 * time.Millisecond, Jitter: true, Until: time.Now().Add(timeout)}
	backoff.Retry(ctx, p, func(ctx context.Context) bool {
		if err = op(ctx); err == nil || errors.Is(err, errRace) {
			return err == nil
		}
		if errors.Is(err, locker.ErrModeMismatch) {
			return true // the rule's answer, not a failure: final, as it is
		}
		// A statement cut short by ctx may have been applied by the server.
		transient, amb := classify(err)
		*ambiguous = *ambiguous || amb || ctx.Err() != nil
		return !transient || ctx.Err() != nil
	})
	switch {
	case err == nil || errors.Is(err, locker.ErrModeMismatch):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("locker/sql: %w (%v)", ctx.Err(), err)
	}
	return locker.Unavailable(err)
}
