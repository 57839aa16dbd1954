package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/locker-go/locker/internal/wait"
)

type postgresDialect struct {
	name string // table name, also the NOTIFY channel
	q    struct {
		acquire, remaining, refresh, release, expire, force, info string
	}
}

func newPostgres(table string) *postgresDialect {
	p := &postgresDialect{name: table}
	r := strings.NewReplacer("{t}", `"`+table+`"`, "{tn}", table, "{now}", "clock_timestamp()",
		"{ttl}", "clock_timestamp() + $3::float8 * interval '1 millisecond'")
	// lk serializes the acquirers of one key until commit, so that fences
	// are drawn in the order acquisitions land (see the package doc). The
	// failed attempt's last branch reads the holder's remaining time; its
	// snapshot predates lk, so it may miss a just-landed holder (then no
	// row: the waiter retries at once).
	// held is a cheap read: when our snapshot already shows another
	// owner's live row, the attempt fails without locking or writing (the
	// key was held during the call; waiters are subscribed by then, so a
	// later release still wakes them). Otherwise the upsert decides.
	p.q.acquire = r.Replace(`WITH held AS (SELECT 1 FROM {t} WHERE "key" = $1::text AND owner <> $2::text AND expires_at > {now}),
lk AS MATERIALIZED (SELECT pg_advisory_xact_lock(hashtext('{tn}'), hashtext($1::text)) WHERE NOT EXISTS (SELECT 1 FROM held)),
ins AS (
	INSERT INTO {t} AS l ("key", owner, fence, holds, expires_at)
	SELECT $1::text, $2::text, nextval('"{tn}_fence"'), 1, {ttl} FROM lk
	ON CONFLICT ("key") DO UPDATE SET
		fence = CASE WHEN l.owner = excluded.owner AND l.expires_at > {now} THEN l.fence ELSE excluded.fence END,
		holds = CASE WHEN l.owner = excluded.owner AND l.expires_at > {now} THEN l.holds + $4::int ELSE 1 END,
		expires_at = CASE WHEN l.owner = excluded.owner AND l.expires_at > {now} THEN GREATEST(l.expires_at, excluded.expires_at) ELSE excluded.expires_at END,
		owner = excluded.owner
	WHERE l.expires_at <= {now} OR l.owner = excluded.owner
	RETURNING fence)
SELECT true, fence, 0::float8 FROM ins
UNION ALL
SELECT false, 0, (extract(epoch FROM expires_at - {now}) * 1000)::float8 FROM {t}
WHERE "key" = $1::text AND NOT EXISTS (SELECT 1 FROM ins)`)
	p.q.remaining = r.Replace(`SELECT (extract(epoch FROM expires_at - {now}) * 1000)::float8 FROM {t} WHERE "key" = $1`)
	p.q.refresh = r.Replace(`UPDATE {t} SET expires_at = GREATEST(expires_at, {now} + $4::float8 * interval '1 millisecond')
WHERE "key" = $1 AND owner = $2 AND fence = $3`)
	// d and u are exclusive by holds; the last column sees the row as the
	// statement's snapshot did, to tell a lost race (row still ours, but
	// changed meanwhile by our own other release: retry) from a row that
	// is not ours.
	p.q.release = r.Replace(`WITH d AS (DELETE FROM {t} WHERE "key" = $1 AND owner = $2 AND fence = $3 AND holds <= 1 RETURNING "key"),
u AS (UPDATE {t} SET holds = holds - 1 WHERE "key" = $1 AND owner = $2 AND fence = $3 AND holds > 1 RETURNING "key"),
n AS (SELECT pg_notify('{tn}', "key") FROM d)
SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM u), (SELECT count(*) FROM n),
	EXISTS (SELECT 1 FROM {t} WHERE "key" = $1 AND owner = $2 AND fence = $3)`)
	p.q.expire = r.Replace(`WITH d AS (DELETE FROM {t} WHERE "key" = $1 AND owner = $2 AND fence = $3 AND expires_at <= {now} RETURNING "key"),
n AS (SELECT pg_notify('{tn}', "key") FROM d)
SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM n)`)
	p.q.force = r.Replace(`WITH d AS (DELETE FROM {t} WHERE "key" = $1 RETURNING "key", expires_at > {now} AS live),
n AS (SELECT pg_notify('{tn}', "key") FROM d)
SELECT coalesce((SELECT bool_or(live) FROM d), false), (SELECT count(*) FROM n)`)
	p.q.info = r.Replace(`SELECT "key", owner, fence, holds, (extract(epoch FROM expires_at) * 1000)::bigint FROM {t} WHERE expires_at > {now}`)
	return p
}

func (p *postgresDialect) migrate(ctx context.Context, db *dbsql.DB) error {
	r := strings.NewReplacer("{t}", `"`+p.name+`"`, "{tn}", p.name)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// CREATE … IF NOT EXISTS still fails when two sessions race to create
	// the same table: take turns.
	for _, s := range []string{
		r.Replace(`SELECT pg_advisory_xact_lock(hashtext('locker/sql migrate {tn}'))`),
		r.Replace(`CREATE TABLE IF NOT EXISTS {t} (
	"key" text COLLATE "C" PRIMARY KEY,
	owner text NOT NULL,
	fence bigint NOT NULL,
	holds integer NOT NULL,
	expires_at timestamptz NOT NULL
)`),
		r.Replace(`CREATE SEQUENCE IF NOT EXISTS "{tn}_fence"`),
	} {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (p *postgresDialect) acquire(ctx context.Context, db *dbsql.DB, key, owner string, ttl time.Duration, inc int) (uint64, bool, time.Duration, error) {
	var (
		held  bool
		fence uint64
		ms    float64
	)
	err := db.QueryRowContext(ctx, p.q.acquire, key, owner, ttl.Milliseconds(), inc).Scan(&held, &fence, &ms)
	if errors.Is(err, dbsql.ErrNoRows) {
		// Held, by a row that landed after our snapshot (we waited for its
		// acquirer's advisory lock): ask again with a fresh snapshot, else
		// every loser of a handoff would retry at once. No row now: it was
		// released meanwhile, and remaining 0 retries at once.
		err = db.QueryRowContext(ctx, p.q.remaining, key).Scan(&ms)
		if errors.Is(err, dbsql.ErrNoRows) {
			err = nil
		}
	}
	if err != nil {
		return 0, false, 0, err
	}
	return fence, held, time.Duration(ms * float64(time.Millisecond)), nil
}

func (p *postgresDialect) refresh(ctx context.Context, db *dbsql.DB, key, owner string, fence uint64, ttl time.Duration) (bool, error) {
	res, err := db.ExecContext(ctx, p.q.refresh, key, owner, int64(fence), ttl.Milliseconds())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

func (p *postgresDialect) release(ctx context.Context, db *dbsql.DB, key, owner string, fence uint64) (bool, bool, error) {
	var (
		deleted, decremented, notified int
		exists                         bool
	)
	err := db.QueryRowContext(ctx, p.q.release, key, owner, int64(fence)).Scan(&deleted, &decremented, &notified, &exists)
	switch {
	case err != nil:
		return false, false, err
	case deleted+decremented == 0 && exists:
		return false, false, errRace
	}
	return deleted+decremented > 0, deleted > 0, nil
}

func (p *postgresDialect) expire(ctx context.Context, db *dbsql.DB, key, owner string, fence uint64) (bool, error) {
	var deleted, notified int
	err := db.QueryRowContext(ctx, p.q.expire, key, owner, int64(fence)).Scan(&deleted, &notified)
	return deleted > 0, err
}

func (p *postgresDialect) forceUnlock(ctx context.Context, db *dbsql.DB, key string) (bool, error) {
	var (
		live     bool
		notified int
	)
	err := db.QueryRowContext(ctx, p.q.force, key).Scan(&live, &notified)
	return live, err
}

func (p *postgresDialect) info() (string, string) {
	return p.q.info, `left("key", char_length($1)) = $1`
}

// classify: server errors are transient only for the codes below; any
// other failure (no PgError) is the connection's, transient, and may have
// been applied unless pgx knows it never sent the statement.
func (p *postgresDialect) classify(err error) (bool, bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01", "55P03", "53300": // serialization, deadlock, lock not available, too many connections
			return true, false
		case "57P01", "57P02", "57P03": // admin/crash shutdown, cannot connect now
			return true, true
		}
		return strings.HasPrefix(pgErr.Code, "08"), true // connection exception
	}
	if strings.Contains(err.Error(), "sql: database is closed") {
		return false, false
	}
	return true, !pgconn.SafeToRetry(err)
}

func (l *sqlLocker) initPostgres(ctx context.Context) error {
	p := newPostgres(l.cfg.table)
	l.d = p
	var cfg *pgx.ConnConfig
	err := l.retry(ctx, func(ctx context.Context) error {
		c, err := l.db.Conn(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		return c.Raw(func(dc any) error {
			if sc, ok := dc.(*stdlib.Conn); ok {
				cfg = sc.Conn().Config()
			}
			return nil
		})
	}, nil)
	if err != nil {
		return err
	}
	if cfg == nil {
		// Not pgx: no LISTEN. Waiters fall back to backoff like SQLite's,
		// woken early only by this Locker's own releases.
		l.poll, l.hub = true, wait.NewHub(localChannel{})
		return nil
	}
	ls := newListener(cfg, p.name)
	l.hub = wait.NewHub(ls)
	ls.hub = l.hub
	l.stop = ls.close
	return nil
}
