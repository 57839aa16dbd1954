package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/locker-go/locker/internal/wait"
)

// nowMS is SQLite's clock in Unix milliseconds. SQLite runs in this
// process, so it is the local clock, shared by every process of the machine.
const nowMS = `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`

// sqliteDialect is the lock table on SQLite.
type sqliteDialect struct {
	statements
	t string // quoted table name
}

func newSQLite(table string) *sqliteDialect {
	s := &sqliteDialect{t: `"` + table + `"`}
	r := strings.NewReplacer("{t}", s.t, "{fence}", `"`+table+`_fence"`, "{now}", nowMS, "{id}", `(' ' || $4 || ' ')`)
	// A same-owner row is re-entered while live, gaining the hold id $4
	// unless it has it already (a retry of this very call); else, as an
	// expired row, taken over: new owner, new fence, one hold. SET reads
	// the old row. SQLite keeps no queue: acquireQueued is acquire.
	acquire := r.Replace(`INSERT INTO {t} AS l ("key", owner, fence, holds, ids, expires_at)
VALUES ($1, $2, (SELECT v + 1 FROM {fence} WHERE id = 1), 1, {id}, {now} + $3)
ON CONFLICT ("key") DO UPDATE SET
	fence = CASE WHEN l.owner = excluded.owner AND l.expires_at > {now} THEN l.fence ELSE excluded.fence END,
	holds = CASE WHEN l.owner = excluded.owner AND l.expires_at > {now} THEN l.holds + (instr(l.ids, excluded.ids) = 0) ELSE 1 END,
	ids = CASE WHEN l.owner = excluded.owner AND l.expires_at > {now} THEN
		CASE WHEN instr(l.ids, excluded.ids) = 0 THEN l.ids || $4 || ' ' ELSE l.ids END ELSE excluded.ids END,
	expires_at = CASE WHEN l.owner = excluded.owner AND l.expires_at > {now} THEN max(l.expires_at, excluded.expires_at) ELSE excluded.expires_at END,
	owner = excluded.owner
WHERE l.expires_at <= {now} OR l.owner = excluded.owner
RETURNING fence`)
	s.sql = queries{
		acquire:       acquire,
		acquireQueued: acquire,
		wait:          r.Replace(`SELECT coalesce((SELECT expires_at - {now} FROM {t} WHERE "key" = $1), 0)`),
		refresh: r.Replace(`UPDATE {t} SET expires_at = max(expires_at, {now} + $5)
WHERE "key" = $1 AND owner = $2 AND fence = $3 AND instr(ids, {id}) > 0 RETURNING 1`),
		// The trigger deletes the row once holds reach 0.
		release: r.Replace(`UPDATE {t} SET holds = holds - 1, ids = replace(ids, {id}, ' ')
WHERE "key" = $1 AND owner = $2 AND ($3 = 0 OR fence = $3) AND instr(ids, {id}) > 0 RETURNING holds <= 0, holds > 0, 0, 0`),
		expire: r.Replace(`DELETE FROM {t} WHERE "key" = $1 AND owner = $2 AND fence = $3 AND expires_at <= {now} RETURNING 1, 0`),
		force:  r.Replace(`DELETE FROM {t} WHERE "key" = $1 RETURNING expires_at > {now}, 0`),
		info:   r.Replace(`SELECT "key", owner, fence, holds, expires_at FROM {t} WHERE expires_at > {now}`),
		prefix: `substr("key", 1, length($1)) = $1`,
	}
	return s
}

func (s *sqliteDialect) migrate(ctx context.Context, tx *dbsql.Tx) error {
	r := strings.NewReplacer("{t}", s.t, "{tn}", strings.Trim(s.t, `"`))
	// IF NOT EXISTS throughout: processes may race to create the schema.
	ddl := r.Replace(`
CREATE TABLE IF NOT EXISTS {t} (
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
BEGIN DELETE FROM {t} WHERE "key" = NEW."key"; END;`)
	// Tables made before hold ids existed. (Their rows then have no ids;
	// they lapse by their TTL.)
	var n int
	err := execAll(ctx, tx, ddl)
	if err == nil {
		err = tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info($1) WHERE name = 'ids'`, strings.Trim(s.t, `"`)).Scan(&n)
	}
	if err == nil && n == 0 {
		err = execAll(ctx, tx, r.Replace(`ALTER TABLE {t} ADD COLUMN ids TEXT NOT NULL DEFAULT ' '`))
	}
	return err
}

// classify: only SQLITE_BUSY and SQLITE_LOCKED are transient, and a
// statement refused with them was not applied.
func (s *sqliteDialect) classify(err error) (bool, bool) {
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
// file and table: the hub by which a release wakes this process's waiters
// at once, and a gate that lets one of them at a time reach the file, so
// they queue here, in order, instead of meeting SQLITE_BUSY and sleeping in
// SQLite's busy handler.
type fileState struct {
	hub  *wait.Hub
	gate chan struct{}
	refs int
}

var (
	filesMu sync.Mutex
	files   = map[string]*fileState{}
)

// localChannel is the hub's backend for in-process notification: nothing
// to subscribe to, since releases in this process call Notify directly.
type localChannel struct{}

func (localChannel) Subscribe(context.Context, string) error { return nil }
func (localChannel) Unsubscribe(string)                      {}

func (d *sqlDriver) initSQLite(ctx context.Context) error {
	s := newSQLite(d.cfg.table)
	d.d, d.q, d.poll = s, s.sql, true
	// One connection per Locker: SQLite has one writer at a time anyway,
	// and a single connection never deadlocks on its own pool.
	d.db.SetMaxOpenConns(1)
	var file string
	err := d.retry(ctx, func(ctx context.Context) error {
		// seq, name, file of the main database; file is "" in memory.
		return d.db.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file)
	}, nil)
	if err != nil {
		return err
	}
	if file == "" {
		return fmt.Errorf("%w: an in-memory SQLite database is private to its connection: use a file", ErrInvalidOption)
	}
	id := file + "\x00" + d.cfg.table
	filesMu.Lock()
	defer filesMu.Unlock()
	f := files[id]
	if f == nil {
		f = &fileState{hub: wait.NewHub(localChannel{}), gate: make(chan struct{}, 1)}
		files[id] = f
	}
	f.refs++
	d.hub, d.gate = f.hub, f.gate
	d.stop = sync.OnceFunc(func() {
		filesMu.Lock()
		defer filesMu.Unlock()
		if f.refs--; f.refs == 0 {
			delete(files, id)
		}
	})
	return nil
}
