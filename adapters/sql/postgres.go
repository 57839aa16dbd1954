package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/backoff"
	"github.com/locker-go/locker/internal/perproc"
	"github.com/locker-go/locker/internal/wait"
)

// pgLeft is {left} on PostgreSQL, a row's time left in ms, rounded up: a
// row with a fraction of a millisecond left is live, where the modal path
// takes 0 as lapsed.
const pgLeft = `ceil(extract(epoch FROM expires_at - {now}) * 1000)::bigint`

// pgDialect is the lock table on PostgreSQL.
func pgDialect(table string) *dialect {
	fill := filler(table, "{q}", `"{tn}_queue"`, "{now}", "clock_timestamp()", "{ms}", "::float8 * interval '1 millisecond'",
		"{pos}", "strpos", "{int}", "::int", "{max}", "GREATEST", "{id}", `(' ' || $4::text || ' ')`, "{next}", pgNext,
		"{admits}", admitsSQL("e.mode"), "{admits:x}", admitsSQL("x.mode"), "{admits:w}", admitsSQL("w.mode"), "{k}", `"key"`, "{h}", `"{tn}_hold"`, "{left}", pgLeft,
		"{abs}", `(extract(epoch FROM expires_at) * 1000)::bigint`, "{prefix}", `left("key", char_length($1)) = $1`)
	mq := newModeQueries(fill, false, `SELECT pg_advisory_xact_lock(hashtext('{tn}'), hashtext($1::text))`,
		`SELECT nextval('"{tn}_fence"')`, "", `SELECT pg_notify('{tn}', w) FROM unnest(string_to_array($1, ' ')) w`,
		`INSERT INTO {q} ("key", token, mode, expires_at, owner, ttl, lim) VALUES ($1, $2, $3, {now} + $4{ms}, $6, $4, $5)`)
	mq.grantFast, mq.releaseFast = newStmt(fill(pgGrantFast), false), newStmt(fill(pgReleaseFast), false)
	mq.grantLimited = newStmt(fill(pgGrantLimited), false)
	return &dialect{
		mq: mq,
		q: queries{
			acquire:       fill(pgUpsert + "\nSELECT fence FROM ins"),
			acquireQueued: fill(pgUpsert + pgQueue),
			wait:          fill(pgWait),
			leave:         fill(pgLeave),
			refresh:       fill(refresh),
			refreshBatch:  fill(pgRefreshBatch),
			release:       fill(pgRelease),
			expire:        fill(pgExpire),
			releaseLane:   fill(`SELECT * FROM "{tn}_xrelease_v9"($1, $2, $3, $4)`),
			expireLane:    fill(`SELECT * FROM "{tn}_xexpire_v1"($1, $2, $3)`),
			status:        fill(pgInfo + byKey),
			list:          fill(pgInfo + byPrefix),
			raise:         fill(pgRaise),
		},
		migrate: func(ctx context.Context, tx *dbsql.Tx) error {
			_, err := tx.ExecContext(ctx, pgAddColumns(fill(pgSchema+";"+pgModeFuncs+pgExclusiveFuncs)))
			return err
		},
		classify:    pgClassify,
		tick:        time.Microsecond, // clock_timestamp()
		noLane:      pgNoLane,
		setup:       pgSetup,
		acquireOnce: runAcquire,
		releaseOnce: runRelease,
	}
}

// The Postgres statements (see queries and filler). {q} is the queue
// table; {tn} also names the advisory lock, fence sequence and NOTIFY channel.
const (
	// pgNext wakes the live waiters that may go once d has freed the key:
	// the first, and those behind it that every waiter before them admits
	// (readers behind a reader; pgAdmits is driver.Mode.Compatible's table).
	pgNext = `n AS (SELECT pg_notify('{tn}', w.token) FROM {q} w
	WHERE w."key" = $1 AND w.expires_at > {now} AND EXISTS (SELECT 1 FROM d)
		AND NOT EXISTS (SELECT 1 FROM {q} e WHERE e."key" = $1 AND e.expires_at > {now} AND e.seq < w.seq
			AND ({admits} >> w.mode) & 1 = 0))`
	// lk serializes the acquirers of one key until commit, so that fences
	// are drawn in the order acquisitions land (see the package doc). A
	// live row of the same owner is re-entered whatever the queue; a free
	// or expired row is taken unless a live waiter queued before us ($5,
	// our token; "" is behind every waiter).
	pgUpsert = `WITH lk AS MATERIALIZED (SELECT pg_advisory_xact_lock(hashtext('{tn}'), hashtext($1::text))),
ahead AS MATERIALIZED (SELECT 1 FROM {q} w, lk WHERE w."key" = $1::text AND w.token <> $5::text AND w.expires_at > {now}
	AND w.seq < coalesce((SELECT seq FROM {q} WHERE "key" = $1::text AND token = $5::text), 9223372036854775807) LIMIT 1),
ins AS (
	INSERT INTO {t} AS l ("key", owner, fence, holds, ids, expires_at)
	SELECT $1::text, $2::text, nextval('"{tn}_fence"'), 1, {id}, {now} + $3{ms} FROM lk
	WHERE NOT EXISTS (SELECT 1 FROM ahead) OR EXISTS (SELECT 1 FROM {t} WHERE "key" = $1::text)
	{upsert}
	WHERE ({mine}) OR (l.expires_at <= {now} AND NOT EXISTS (SELECT 1 FROM ahead))
	RETURNING fence)`
	// pgQueue: a queued waiter leaves the queue when it acquires, else
	// takes or keeps its place for the TTL; lapsed places are cleared.
	// The place names its owner and TTL, for a release to hand it the key
	// (pgHandoffFunc).
	pgQueue = `,
deq AS (DELETE FROM {q} WHERE "key" = $1::text AND token = $5::text AND EXISTS (SELECT 1 FROM ins)),
enq AS (INSERT INTO {q} ("key", token, expires_at, owner, ttl) SELECT $1::text, $5::text, {now} + $3{ms}, $2::text, $3::bigint
	WHERE NOT EXISTS (SELECT 1 FROM ins)
	ON CONFLICT ("key", token) DO UPDATE SET expires_at = excluded.expires_at),
gc AS (DELETE FROM {q} WHERE "key" = $1::text AND token <> $5::text AND expires_at <= {now})
SELECT fence FROM ins`
	// pgWait: the holder's time left, else (the key is free, but waiters
	// are ahead) until the first of them lapses, else 0; and whether
	// Limited holders hold the key (limitWait).
	pgWait = `SELECT coalesce(
	(SELECT (extract(epoch FROM expires_at - {now}) * 1000)::bigint FROM {t} WHERE "key" = $1 AND expires_at > {now}),
	(SELECT (extract(epoch FROM min(expires_at) - {now}) * 1000)::bigint FROM {q} WHERE "key" = $1 AND token <> $2 AND expires_at > {now}),
	0), ` + limitWait
	// pgLeave: if the key is free, the next waiter may have been waiting
	// behind the one that leaves: wake it.
	pgLeave = `WITH d AS (DELETE FROM {q} WHERE "key" = $1 AND token = $2 RETURNING 1)
SELECT count(*) FROM (SELECT pg_notify('{tn}', w.token) FROM (SELECT token FROM {q}
	WHERE "key" = $1 AND token <> $2 AND expires_at > {now} AND EXISTS (SELECT 1 FROM d)
		AND NOT EXISTS (SELECT 1 FROM {t} WHERE "key" = $1 AND expires_at > {now})
	ORDER BY seq LIMIT 1) w) n`
	// pgRelease: d and u are exclusive. exists sees the row in the
	// statement's snapshot: the hold there, but the row changed meanwhile
	// by another release of the owner, is a lost race (retry).
	pgRelease = `WITH d AS (DELETE FROM {t} WHERE "key" = $1 AND owner = $2 AND ($3::bigint = 0 OR fence = $3) AND ids = {id} RETURNING "key"),
u AS (UPDATE {t} SET holds = holds - 1, ids = replace(ids, {id}, ' ')
	WHERE "key" = $1 AND owner = $2 AND ($3::bigint = 0 OR fence = $3) AND strpos(ids, {id}) > 0 AND ids <> {id} RETURNING "key"),
{next}
SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM u), (SELECT count(*) FROM n),
	EXISTS (SELECT 1 FROM {t} WHERE "key" = $1 AND owner = $2 AND ($3::bigint = 0 OR fence = $3) AND strpos(ids, {id}) > 0)`
	pgExpire = `WITH d AS (DELETE FROM {t} WHERE "key" = $1 AND owner = $2 AND fence = $3 AND expires_at <= {now} RETURNING "key"),
{next}
SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM n)`
	pgInfo = `SELECT "key", owner, fence, holds, (extract(epoch FROM expires_at) * 1000)::bigint FROM {t} WHERE expires_at > {now}`
)

// pgClassify: server errors are transient for the codes below; other
// failures are the connection's: transient, applied unless pgx knows not.
func pgClassify(err error) (bool, bool) {
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

// pgNoLane: a lane function missing (42883), or not this user's to run
// (42501).
func pgNoLane(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42883" || pgErr.Code == "42501")
}

// pgSetup listens through pgx for the table's notifications, on a
// connection that the process's Lockers on the same pool and table share.
func pgSetup(ctx context.Context, d *sqlDriver) error {
	cfg, err := pgxConfig(ctx, d)
	if err != nil {
		return err
	}
	if cfg == nil {
		// Not pgx: no LISTEN. Waiters fall back to backoff like SQLite's,
		// woken early only by this Locker's own releases.
		d.poll, d.hub, d.local = true, wait.NewHub(localChannel{}), newLocalQueue()
		return nil
	}
	ls, release, err := listeners.Get(ctx, listenerKey{d.db, d.cfg.table},
		func() (*listener, error) { return newListener(cfg, d.cfg.table), nil }, (*listener).close)
	if err != nil {
		return err
	}
	d.hub, d.stop, d.queued, d.handoffs, d.listening = ls.hub, release, true, &ls.handoffs, ls.listening
	d.listenLog = &ls.Log
	return nil
}

// listeners are the LISTEN connections of this process, one per pool and
// table: 400 Lockers on one URL (one pool, see pools) listen on one.
var listeners perproc.Map[listenerKey, *listener]

type listenerKey struct {
	db    *dbsql.DB
	table string
}

// pgxConfig returns the pgx config of d's pool, or nil if it is not pgx.
func pgxConfig(ctx context.Context, d *sqlDriver) (*pgx.ConnConfig, error) {
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
	return cfg, err
}

// pgAddColumn is "{addcol:TABLE:COLUMN:TYPE}" in pgSchema: a column
// added to a table made by an earlier version. Only if it is missing: ALTER
// TABLE takes an ACCESS EXCLUSIVE lock even when IF NOT EXISTS finds the
// column, and a Locker opening while others lock would then deadlock with
// them (it holds the lock table, and waits for the queue they read).
var pgAddColumn = regexp.MustCompile(`\{addcol:([a-z0-9_]+):([a-z_]+):([^}]*)\}`)

func pgAddColumns(schema string) string {
	return pgAddColumn.ReplaceAllString(schema, `DO $$$$ BEGIN
	IF NOT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = '$1' AND column_name = '$2') THEN
		ALTER TABLE "$1" ADD COLUMN $2 $3;
	END IF;
END $$$$;`)
}

// pgSchema takes turns with other sessions first: CREATE … IF NOT EXISTS
// still fails when two sessions race to create the same table. The ids
// column is added to tables made before hold ids existed (their rows then
// have no ids; they lapse by their TTL).
const pgSchema = `SELECT pg_advisory_xact_lock(hashtext('locker/sql migrate {tn}'));
CREATE TABLE IF NOT EXISTS {t} (
	"key" text COLLATE "C" PRIMARY KEY,
	owner text NOT NULL,
	fence bigint NOT NULL,
	holds integer NOT NULL,
	ids text NOT NULL DEFAULT ' ',
	expires_at timestamptz NOT NULL
);
{addcol:{tn}:ids:text NOT NULL DEFAULT ' '}
CREATE SEQUENCE IF NOT EXISTS "{tn}_fence";
CREATE TABLE IF NOT EXISTS {q} (
	"key" text COLLATE "C" NOT NULL,
	token text NOT NULL,
	seq bigint GENERATED ALWAYS AS IDENTITY,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY ("key", token)
);
{addcol:{tn}_queue:mode:smallint NOT NULL DEFAULT 0}
{addcol:{tn}_queue:owner:text NOT NULL DEFAULT ''}
{addcol:{tn}_queue:ttl:bigint NOT NULL DEFAULT 0}
{addcol:{tn}_queue:lim:integer NOT NULL DEFAULT 0}
CREATE TABLE IF NOT EXISTS {h} (
	"key" text COLLATE "C" NOT NULL,
	owner text NOT NULL,
	mode smallint NOT NULL,
	fence bigint NOT NULL,
	holds integer NOT NULL,
	ids text NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY ("key", owner, mode)
);
{addcol:{tn}_hold:lim:integer NOT NULL DEFAULT 0}`

// listener is a driver's one dedicated Postgres connection LISTENing on
// the table's channel, feeding every notification (payload: the token of
// the waiter whose turn it is) to its hub. As the hub's wait.Channel, a
// waiter's subscription needs only the LISTEN to be live.
type listener struct {
	cfg     *pgx.ConnConfig
	channel string
	hub     *wait.Hub
	// handoffs keeps the fences that notifications of a hand-off carry
	// ("token fence"), for the waiters here.
	handoffs handoffs
	ctx      context.Context // ends at close
	cancel   context.CancelFunc
	start    sync.Once
	done     chan struct{}

	driver.Log // the logger its Lockers set last

	mu      sync.Mutex
	up      chan struct{} // closed while listening
	err     error         // why the last connection attempt or connection failed
	dropped bool          // it was up, then lost: the next up is logged
}

func newListener(cfg *pgx.ConnConfig, channel string) *listener {
	ls := &listener{cfg: cfg, channel: channel, done: make(chan struct{}), up: make(chan struct{})}
	ls.ctx, ls.cancel = context.WithCancel(context.Background())
	ls.hub = wait.NewHub(ls)
	return ls
}

// Subscribe starts the listener on first use and returns once the channel
// is LISTENed to: a release committed after that reaches the hub.
func (ls *listener) Subscribe(ctx context.Context, _ string) error {
	ls.start.Do(func() { go ls.run() })
	ls.mu.Lock()
	up := ls.up
	ls.mu.Unlock()
	select {
	case <-up:
		return nil
	case <-ls.ctx.Done():
		return locker.ErrClosed
	case <-ctx.Done():
		ls.mu.Lock()
		defer ls.mu.Unlock()
		if ls.err != nil {
			return fmt.Errorf("%w: LISTEN: %w", ctx.Err(), locker.Unavailable(ls.err))
		}
		return ctx.Err()
	}
}

// listening reports whether the connection is up and LISTENs.
func (ls *listener) listening() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	select {
	case <-ls.up:
		return true
	default:
		return false
	}
}

// Unsubscribe does nothing: the channel carries every key.
func (ls *listener) Unsubscribe(string) {}

// run keeps one LISTEN connection up until close, reconnecting with
// backoff, which starts over once a connection was up.
func (ls *listener) run() {
	defer close(ls.done)
	for p := (backoff.Policy{Min: 10 * time.Millisecond, Max: time.Second}); ls.ctx.Err() == nil; backoff.Sleep(ls.ctx, p.Min) {
		backoff.Retry(ls.ctx, p, func(context.Context) bool {
			err := ls.listen()
			ls.mu.Lock()
			defer ls.mu.Unlock()
			ls.err = err
			select {
			case <-ls.up: // it was up: mark it down
				ls.up, ls.dropped = make(chan struct{}), true
				if ls.ctx.Err() == nil {
					ls.Info("locker/sql: the LISTEN connection was lost; reconnecting", "error", err)
				}
				return true
			default:
				return false
			}
		})
	}
}

// listen connects, LISTENs, and delivers notifications until the
// connection fails or the listener closes.
func (ls *listener) listen() error {
	ctx, cancel := context.WithTimeout(ls.ctx, 10*time.Second)
	cfg := ls.cfg.Copy()
	// A config taken from a pooled connection carries that connection's
	// notification buffer: let pgx set up this connection's own.
	cfg.OnNotification = nil
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = conn.Close(ctx)
		}()
		_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{ls.channel}.Sanitize())
	}
	cancel()
	if err != nil {
		return err
	}
	ls.mu.Lock()
	close(ls.up)
	again := ls.dropped
	ls.dropped = false
	ls.mu.Unlock()
	if again {
		// Releases while no connection listened were not heard: every
		// waiter looks again. (On the first connection none has looked
		// yet, each Subscribe having waited for up: a wake then would be
		// spurious, a round trip for each waiter.)
		ls.Info("locker/sql: the LISTEN connection is up again; waiters look again")
		ls.hub.NotifyAll()
	}
	for {
		n, err := conn.WaitForNotification(ls.ctx)
		if err != nil {
			return err
		}
		token, _ := ls.handoffs.heard(n.Payload, ls.hub.Waiting)
		ls.hub.Notify(token)
	}
}

// close stops the listener and waits for it (idempotent).
func (ls *listener) close() {
	ls.cancel()
	ls.start.Do(func() { close(ls.done) }) // never started
	<-ls.done
}
