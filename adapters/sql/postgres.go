package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/locker-go/locker/internal/wait"
)

// postgresDialect is the lock table on PostgreSQL.
type postgresDialect struct {
	statements
	name string // table name, also the NOTIFY channel
}

func newPostgres(table string) *postgresDialect {
	r := strings.NewReplacer("{t}", `"`+table+`"`, "{q}", `"`+table+`_queue"`, "{tn}", table, "{now}", "clock_timestamp()",
		"{ttl}", "clock_timestamp() + $3::float8 * interval '1 millisecond'",
		"{id}", `(' ' || $4::text || ' ')`, "{next}", pgNext)
	sub := func(s string) string { return r.Replace(r.Replace(s)) } // twice: {next} holds placeholders
	p := &postgresDialect{name: table}
	p.sql = queries{
		acquire:       sub(pgUpsert + "\nSELECT fence FROM ins"),
		acquireQueued: sub(pgUpsert + pgQueue),
		wait:          sub(pgWait),
		leave:         sub(pgLeave),
		refresh:       sub(pgRefresh),
		release:       sub(pgRelease),
		expire:        sub(pgExpire),
		force:         sub(pgForce),
		info:          sub(pgInfo),
		prefix:        `left("key", char_length($1)) = $1`,
	}
	return p
}

// The Postgres statements (see queries), before newPostgres names the
// table ({t}), its queue ({q}) and the bare name ({tn}: advisory lock,
// fence sequence, NOTIFY channel).
const (
	// pgNext wakes the first live waiter once d has freed the key.
	pgNext = `n AS (SELECT pg_notify('{tn}', w.token) FROM (SELECT token FROM {q}
	WHERE "key" = $1 AND expires_at > {now} AND EXISTS (SELECT 1 FROM d) ORDER BY seq LIMIT 1) w)`
	// lk serializes the acquirers of one key until commit, so that fences
	// are drawn in the order acquisitions land (see the package doc). A
	// live row of the same owner gains the hold id unless it has it
	// already, whatever the queue; a free or expired row is taken unless a
	// live waiter queued before us ($5, our token; "" is behind every
	// waiter).
	pgUpsert = `WITH lk AS MATERIALIZED (SELECT pg_advisory_xact_lock(hashtext('{tn}'), hashtext($1::text))),
ahead AS MATERIALIZED (SELECT 1 FROM {q} w, lk WHERE w."key" = $1::text AND w.token <> $5::text AND w.expires_at > {now}
	AND w.seq < coalesce((SELECT seq FROM {q} WHERE "key" = $1::text AND token = $5::text), 9223372036854775807) LIMIT 1),
ins AS (
	INSERT INTO {t} AS l ("key", owner, fence, holds, ids, expires_at)
	SELECT $1::text, $2::text, nextval('"{tn}_fence"'), 1, {id}, {ttl} FROM lk
	WHERE NOT EXISTS (SELECT 1 FROM ahead) OR EXISTS (SELECT 1 FROM {t} WHERE "key" = $1::text)
	ON CONFLICT ("key") DO UPDATE SET
		fence = CASE WHEN l.owner = excluded.owner AND l.expires_at > {now} THEN l.fence ELSE excluded.fence END,
		holds = CASE WHEN l.owner = excluded.owner AND l.expires_at > {now} THEN l.holds + (strpos(l.ids, excluded.ids) = 0)::int ELSE 1 END,
		ids = CASE WHEN l.owner = excluded.owner AND l.expires_at > {now} THEN
			CASE WHEN strpos(l.ids, excluded.ids) = 0 THEN l.ids || $4::text || ' ' ELSE l.ids END ELSE excluded.ids END,
		expires_at = CASE WHEN l.owner = excluded.owner AND l.expires_at > {now} THEN GREATEST(l.expires_at, excluded.expires_at) ELSE excluded.expires_at END,
		owner = excluded.owner
	WHERE (l.owner = excluded.owner AND l.expires_at > {now}) OR (l.expires_at <= {now} AND NOT EXISTS (SELECT 1 FROM ahead))
	RETURNING fence)`
	// pgQueue: a queued waiter's attempt also leaves the queue when it
	// acquires, or else takes (or keeps) its place there until {ttl}, and
	// clears places that lapsed.
	pgQueue = `,
deq AS (DELETE FROM {q} WHERE "key" = $1::text AND token = $5::text AND EXISTS (SELECT 1 FROM ins)),
enq AS (INSERT INTO {q} ("key", token, expires_at) SELECT $1::text, $5::text, {ttl} WHERE NOT EXISTS (SELECT 1 FROM ins)
	ON CONFLICT ("key", token) DO UPDATE SET expires_at = excluded.expires_at),
gc AS (DELETE FROM {q} WHERE "key" = $1::text AND token <> $5::text AND expires_at <= {now})
SELECT fence FROM ins`
	// pgWait: the holder's time left, else (the key is free, but waiters
	// are ahead) until the first of them lapses, else 0.
	pgWait = `SELECT coalesce(
	(SELECT (extract(epoch FROM expires_at - {now}) * 1000)::bigint FROM {t} WHERE "key" = $1 AND expires_at > {now}),
	(SELECT (extract(epoch FROM min(expires_at) - {now}) * 1000)::bigint FROM {q} WHERE "key" = $1 AND token <> $2 AND expires_at > {now}),
	0)`
	// pgLeave: if the key is free, the next waiter may have been waiting
	// behind the one that leaves: wake it.
	pgLeave = `WITH d AS (DELETE FROM {q} WHERE "key" = $1 AND token = $2 RETURNING 1)
SELECT count(*) FROM (SELECT pg_notify('{tn}', w.token) FROM (SELECT token FROM {q}
	WHERE "key" = $1 AND token <> $2 AND expires_at > {now} AND EXISTS (SELECT 1 FROM d)
		AND NOT EXISTS (SELECT 1 FROM {t} WHERE "key" = $1 AND expires_at > {now})
	ORDER BY seq LIMIT 1) w) n`
	pgRefresh = `UPDATE {t} SET expires_at = GREATEST(expires_at, {now} + $5::float8 * interval '1 millisecond')
WHERE "key" = $1 AND owner = $2 AND fence = $3 AND strpos(ids, {id}) > 0 RETURNING 1`
	// pgRelease: d and u are exclusive. exists sees the row as the
	// statement's snapshot did, to tell a lost race (hold still there, but
	// the row changed meanwhile by another release of the same owner:
	// retry) from a hold that is not there.
	pgRelease = `WITH d AS (DELETE FROM {t} WHERE "key" = $1 AND owner = $2 AND ($3::bigint = 0 OR fence = $3) AND ids = {id} RETURNING "key"),
u AS (UPDATE {t} SET holds = holds - 1, ids = replace(ids, {id}, ' ')
	WHERE "key" = $1 AND owner = $2 AND ($3::bigint = 0 OR fence = $3) AND strpos(ids, {id}) > 0 AND ids <> {id} RETURNING "key"),
{next}
SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM u), (SELECT count(*) FROM n),
	EXISTS (SELECT 1 FROM {t} WHERE "key" = $1 AND owner = $2 AND ($3::bigint = 0 OR fence = $3) AND strpos(ids, {id}) > 0)`
	pgExpire = `WITH d AS (DELETE FROM {t} WHERE "key" = $1 AND owner = $2 AND fence = $3 AND expires_at <= {now} RETURNING "key"),
{next}
SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM n)`
	pgForce = `WITH d AS (DELETE FROM {t} WHERE "key" = $1 RETURNING "key", expires_at > {now} AS live),
{next}
SELECT coalesce((SELECT bool_or(live) FROM d), false), (SELECT count(*) FROM n)`
	pgInfo = `SELECT "key", owner, fence, holds, (extract(epoch FROM expires_at) * 1000)::bigint FROM {t} WHERE expires_at > {now}`
)

// migrate takes turns with other sessions first: CREATE … IF NOT EXISTS
// still fails when two sessions race to create the same table.
func (p *postgresDialect) migrate(ctx context.Context, tx *dbsql.Tx) error {
	r := strings.NewReplacer("{t}", `"`+p.name+`"`, "{tn}", p.name)
	return execAll(ctx, tx,
		r.Replace(`SELECT pg_advisory_xact_lock(hashtext('locker/sql migrate {tn}'))`),
		r.Replace(`CREATE TABLE IF NOT EXISTS {t} (
	"key" text COLLATE "C" PRIMARY KEY,
	owner text NOT NULL,
	fence bigint NOT NULL,
	holds integer NOT NULL,
	ids text NOT NULL DEFAULT ' ',
	expires_at timestamptz NOT NULL
)`),
		// Tables made before hold ids existed. (Their rows then have no
		// ids; they lapse by their TTL.)
		r.Replace(`ALTER TABLE {t} ADD COLUMN IF NOT EXISTS ids text NOT NULL DEFAULT ' '`),
		r.Replace(`CREATE SEQUENCE IF NOT EXISTS "{tn}_fence"`),
		r.Replace(`CREATE TABLE IF NOT EXISTS "{tn}_queue" (
	"key" text COLLATE "C" NOT NULL,
	token text NOT NULL,
	seq bigint GENERATED ALWAYS AS IDENTITY,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY ("key", token)
)`))
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

func (d *sqlDriver) initPostgres(ctx context.Context) error {
	p := newPostgres(d.cfg.table)
	d.d, d.q = p, p.sql
	var cfg *pgx.ConnConfig
	err := d.retry(ctx, func(ctx context.Context) error {
		c, err := d.db.Conn(ctx)
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
		d.poll, d.hub = true, wait.NewHub(localChannel{})
		return nil
	}
	ls := newListener(cfg, p.name)
	d.hub = wait.NewHub(ls)
	ls.hub = d.hub
	d.stop = ls.close
	return nil
}
