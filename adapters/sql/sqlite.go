package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	gsqlite "github.com/libtnb/sqlite"
	"gorm.io/gorm"

	"github.com/locker-go/locker/internal/perproc"
	"github.com/locker-go/locker/internal/wait"
)

// nowMS is SQLite's clock in Unix milliseconds. SQLite runs in this
// process, so it is the local clock, shared by every process of the machine.
// julianday counts whole milliseconds, as a fraction of a day that a
// double holds to within 0.02 ms: rounded, not truncated, the product is
// that millisecond, where truncating it gave the one before about half
// the time.
const nowMS = `CAST(round((julianday('now') - 2440587.5) * 86400000) AS INTEGER)`

// sqliteDialect is the lock table on SQLite. It keeps no queue: acquireQueued
// is acquire. The fence counter row is kept by triggers, and a row whose
// holds reach 0 is deleted by one.
func sqliteDialect(table string) *dialect {
	fill := filler(table, "{now}", nowMS, "{ms}", "", "{pos}", "instr", "{int}", "", "{max}", "max", "{id}", `(' ' || $4 || ' ')`,
		"{k}", `"key"`, "{h}", `"{tn}_hold"`, "{q}", `"{tn}_queue"`, "{left}", `(expires_at - {now})`, "{abs}", "expires_at",
		"{prefix}", `substr("key", 1, length($1)) = $1`)
	acquire := fill(`INSERT INTO {t} AS l ("key", owner, fence, holds, ids, expires_at)
VALUES ($1, $2, (SELECT v + 1 FROM "{tn}_fence" WHERE id = 1), 1, {id}, {now} + $3)
{upsert}
WHERE l.expires_at <= {now} OR l.owner = excluded.owner
RETURNING fence`)
	// The lock is a write, so that the transaction holds SQLite's write
	// lock from its start: one that upgraded later could meet another's
	// and fail (SQLITE_BUSY) after its reads.
	mq := newModeQueries(fill, false, `UPDATE "{tn}_fence" SET v = v WHERE id = 1`,
		`UPDATE "{tn}_fence" SET v = v + 1 WHERE id = 1 RETURNING v`, "", "",
		`INSERT INTO {q} ("key", token, mode, seq, expires_at, lim)
SELECT $1, $2, $3, coalesce(max(seq), 0) + 1, {now} + $4, $5 FROM {q} WHERE "key" = $1`)
	mq.handDirect = newStmt(fill(sqliteHandDirect), false)
	return &dialect{
		mq: mq,
		q: queries{
			acquire:       acquire,
			acquireQueued: acquire,
			wait:          fill(`SELECT coalesce((SELECT expires_at - {now} FROM {t} WHERE "key" = $1), 0), ` + limitWait),
			refresh:       fill(refresh),
			refreshBatch:  fill(sqliteRefreshBatch),
			release: fill(`UPDATE {t} SET holds = holds - 1, ids = replace(ids, {id}, ' ')
WHERE "key" = $1 AND owner = $2 AND ($3 = 0 OR fence = $3) AND instr(ids, {id}) > 0 RETURNING holds <= 0, holds > 0, 0, 0`),
			expire: fill(`DELETE FROM {t} WHERE "key" = $1 AND owner = $2 AND fence = $3 AND expires_at <= {now} RETURNING 1, 0`),
			status: fill(sqliteInfo + byKey),
			list:   fill(sqliteInfo + byPrefix),
			raise:  fill(sqliteRaise),
		},
		migrate: func(ctx context.Context, tx *dbsql.Tx) error {
			if _, err := tx.ExecContext(ctx, fill(sqliteSchema)); err != nil {
				return err
			}
			// Tables made before hold ids existed get the column (their
			// rows then have no ids; they lapse by their TTL); those made
			// before limits, lim (0: no Limited holder or waiter).
			for _, c := range [][2]string{{table, "ids TEXT NOT NULL DEFAULT ' '"},
				{table + "_hold", "lim INTEGER NOT NULL DEFAULT 0"}, {table + "_queue", "lim INTEGER NOT NULL DEFAULT 0"}} {
				if err := sqliteAddColumn(ctx, tx, c[0], c[1]); err != nil {
					return err
				}
			}
			return nil
		},
		classify:    sqliteClassify,
		tick:        time.Millisecond, // nowMS
		setup:       sqliteSetup,
		acquireOnce: runAcquire,
		releaseOnce: runRelease,
		prepares:    true,
	}
}

// sqliteHandDirect is handDirect (modesql.go): the fence drawn as acquire
// draws it (the counter follows by trigger); the waiter's place first of
// the live places (its mode is the caller's to check: the waiter's own);
// its place taken by trigger ({tn}_handed).
const sqliteHandDirect = `UPDATE {t} SET owner = $5, fence = (SELECT v + 1 FROM "{tn}_fence" WHERE id = 1), holds = 1,
	ids = ' ' || $6 || ' ', expires_at = {now} + $7
WHERE "key" = $1 AND owner = $2 AND ($3 = 0 OR fence = $3) AND ids = {id}
	AND (SELECT token FROM {q} WHERE "key" = $1 AND expires_at > {now} ORDER BY seq LIMIT 1) = $6
	AND NOT EXISTS (SELECT 1 FROM {h} WHERE "key" = $1 AND expires_at > {now})
RETURNING fence`

const sqliteInfo = `SELECT "key", owner, fence, holds, expires_at FROM {t} WHERE expires_at > {now}`

// sqliteSchema: IF NOT EXISTS throughout, since processes may race to
// create it. A row's sole hold has no place in the queue: the trigger
// {tn}_handed takes it as the hold comes (handDirect gives a row to a
// waiter, even of the same owner, and takes its place so).
const sqliteSchema = `CREATE TABLE IF NOT EXISTS {t} (
	"key" TEXT NOT NULL PRIMARY KEY,
	owner TEXT NOT NULL,
	fence INTEGER NOT NULL,
	holds INTEGER NOT NULL,
	ids TEXT NOT NULL DEFAULT ' ',
	expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS "{tn}_fence" (id INTEGER PRIMARY KEY CHECK (id = 1), v INTEGER NOT NULL);
INSERT OR IGNORE INTO "{tn}_fence" (id, v) VALUES (1, 0);
CREATE TRIGGER IF NOT EXISTS "{tn}_fence_insert" AFTER INSERT ON {t}
BEGIN UPDATE "{tn}_fence" SET v = NEW.fence WHERE id = 1 AND v < NEW.fence; END;
CREATE TRIGGER IF NOT EXISTS "{tn}_fence_update" AFTER UPDATE OF fence ON {t}
BEGIN UPDATE "{tn}_fence" SET v = NEW.fence WHERE id = 1 AND v < NEW.fence; END;
CREATE TRIGGER IF NOT EXISTS "{tn}_release" AFTER UPDATE OF holds ON {t} WHEN NEW.holds <= 0
BEGIN DELETE FROM {t} WHERE "key" = NEW."key"; END;
CREATE TABLE IF NOT EXISTS {h} (
	"key" TEXT NOT NULL,
	owner TEXT NOT NULL,
	mode INTEGER NOT NULL,
	fence INTEGER NOT NULL,
	holds INTEGER NOT NULL,
	ids TEXT NOT NULL,
	expires_at INTEGER NOT NULL,
	lim INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY ("key", owner, mode)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS {q} (
	"key" TEXT NOT NULL,
	token TEXT NOT NULL,
	mode INTEGER NOT NULL DEFAULT 0,
	seq INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	lim INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY ("key", token)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS "{tn}_handed" AFTER UPDATE OF ids ON {t} WHEN NEW.ids <> OLD.ids
BEGIN DELETE FROM {q} WHERE "key" = NEW."key" AND token = trim(NEW.ids); END;`

// sqliteAddColumn adds column (its definition, name first) to table
// unless it has it: a table made by an earlier version.
func sqliteAddColumn(ctx context.Context, tx *dbsql.Tx, table, column string) error {
	var n int
	name, _, _ := strings.Cut(column, " ")
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info($1) WHERE name = $2`, table, name).Scan(&n)
	if err == nil && n == 0 {
		_, err = tx.ExecContext(ctx, `ALTER TABLE "`+table+`" ADD COLUMN `+column)
	}
	return err
}

// beginsImmediate reports whether the transactions of the SQLite database
// dl opens begin IMMEDIATE (its DSN's _txlock, which Open's DSN sets),
// taking the write lock from their start. A database given to New by a
// connection pool of its own may not: the modal path then takes the lock
// itself (lockKey).
func beginsImmediate(dl gorm.Dialector) bool {
	s, ok := dl.(*gsqlite.Dialector)
	if !ok || s.Conn != nil || s.DriverName != "" && s.DriverName != gsqlite.DriverName {
		return false
	}
	_, q, _ := strings.Cut(s.DSN, "?")
	v, err := url.ParseQuery(q)
	return err == nil && strings.EqualFold(v.Get("_txlock"), "immediate")
}

// sqliteClassify: only SQLITE_BUSY and SQLITE_LOCKED are transient, and a
// statement refused with them was not applied.
func sqliteClassify(err error) (bool, bool) {
	var c interface{ Code() int }
	if errors.As(err, &c) {
		switch c.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return true, false
		}
	}
	return false, false
}

// fileState is what the Lockers of this process share for one database
// file and table: the hub and queue by which a release wakes this process's
// first waiter at once, and a gate that lets one of them at a time reach the file, so
// they queue here, in order, instead of meeting SQLITE_BUSY and sleeping in
// SQLite's busy handler.
type fileState struct {
	hub   *wait.Hub
	gate  chan struct{}
	local *localQueue
}

// files are the fileStates of this process, by file and table.
var files perproc.Map[string, *fileState]

// localChannel is the hub's backend for in-process notification: nothing
// to subscribe to, since releases in this process call Notify directly.
type localChannel struct{}

func (localChannel) Subscribe(context.Context, string) error { return nil }
func (localChannel) Unsubscribe(string)                      {}

// sqliteSetup joins the process's Lockers on the same file and table.
func sqliteSetup(ctx context.Context, d *sqlDriver) error {
	d.poll, d.batches = true, true
	// One connection per Locker: SQLite has one writer at a time anyway,
	// and a single connection never deadlocks on its own pool.
	d.db.SetMaxOpenConns(1)
	var file string // "" in memory
	if err := d.row(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`, nil, &file); err != nil {
		return err
	}
	if file == "" {
		return fmt.Errorf("%w: an in-memory SQLite database is private to its connection: use a file", ErrInvalidOption)
	}
	f, release, err := files.Get(ctx, file+"\x00"+d.cfg.table, func() (*fileState, error) {
		return &fileState{hub: wait.NewHub(localChannel{}), gate: make(chan struct{}, 1), local: newLocalQueue()}, nil
	}, func(*fileState) {})
	if err != nil {
		return err
	}
	d.hub, d.gate, d.local, d.stop = f.hub, f.gate, f.local, release
	return nil
}
