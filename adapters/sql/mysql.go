package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locker-go/locker/driver"
)

// myDialect is the lock table on MySQL and MariaDB. Neither returns rows
// from a write, so every operation is a few plain statements, and no lock
// outlives one. A free key is claimed by an INSERT with fence 0, then given
// a fence drawn from the counter row, which the claim keeps only if it is
// still ours. The draw follows the claim, and a key's next claim follows
// the release or expiry of the one before: fences rise in grant order. (An
// AUTO_INCREMENT fence would not: InnoDB draws it before it finds the key
// taken, so two inserts can draw in one order and land in the other.)
func myDialect(table string) *dialect {
	fill := filler(table, "{t}", "`{tn}`", "{q}", "`{tn}_queue`", "{now}", myNow, "{ms}", "", "{max}", "GREATEST",
		"{k}", "`key`", "{h}", "`{tn}_hold`", "{left}", "(expires_at - {now})", "{abs}", "expires_at",
		"{prefix}", "LEFT(`key`, LENGTH($1)) = $1", "{admits}", admitsSQL("w.mode"))
	m := newMyStatements(fill)
	// The lock is the key's row, inserted (expired) if missing: every
	// Exclusive statement on the key waits for it until commit.
	mq := newModeQueries(fill, true,
		"INSERT INTO {t} (`key`, owner, fence, holds, ids, expires_at) VALUES ($1, '', 0, 1, ' ', 0) ON DUPLICATE KEY UPDATE `key` = `key`",
		"SELECT LAST_INSERT_ID()", "UPDATE `{tn}_fence` SET v = LAST_INSERT_ID(v + 1) WHERE id = 1", "",
		"INSERT INTO {q} (`key`, token, mode, expires_at, lim) VALUES ($1, $2, $3, {now} + $4, $5)")
	mq.grantFast, mq.releaseFast = stmt{q: fill(myGrantFast)}, stmt{q: fill(myReleaseFast)}
	mq.grantLimited = stmt{q: fill(myGrantLimited)}
	return &dialect{
		mq:        mq,
		txOptions: &dbsql.TxOptions{Isolation: dbsql.LevelReadCommitted},
		q: queries{
			leave:  m.dequeue,
			status: fill(myInfo + " AND `key` = ?"),
			// One parameter, however often the condition names it.
			list: fill("SELECT l.`key`, l.owner, l.fence, l.holds, l.expires_at FROM {t} l JOIN (SELECT ? AS p) a " +
				"ON LEFT(l.`key`, LENGTH(a.p)) = a.p WHERE l.expires_at > {now} AND l.fence <> 0"),
			raise: fill(myRaise),
		},
		migrate: func(ctx context.Context, tx *dbsql.Tx) error {
			for _, stmt := range strings.Split(fill(mySchema), ";\n") {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return err
				}
			}
			return myModeColumns(ctx, tx, table, fill)
		},
		classify: myClassify,
		tick:     time.Millisecond, // myNow
		setup: func(ctx context.Context, d *sqlDriver) error {
			m.multi = multiStatements(ctx, d.db)
			myModeProcs(ctx, d, fill)
			return mySetup(ctx, d, m)
		},
		acquireOnce: m.acquire,
		placeOnce:   m.placeOnce,
		noLane:      myNoLane,
		releaseOnce: m.release,
		refreshOnce: m.refreshOnce,
		// the batch statement is built per batch: its holds are rows of it
		refreshBatchOnce: newMyRefreshBatch(fill).once,
		expireOnce: func(ctx context.Context, h *hold) (bool, error) {
			return affected(h.d.db.ExecContext(ctx, m.expire, h.key, h.owner, h.fence))
		},
	}
}

// newMyStatements fills in the MySQL statements for one table.
func newMyStatements(fill func(string) string) *myStatements {
	const match = " WHERE `key` = ? AND owner = ? AND (? = 0 OR fence = ?)"
	// A claim passes no live waiter queued before the call: claimFirst is
	// a call that does not queue (behind every waiter), claimQueued one
	// that does (token ?).
	const (
		// parked: a waiter after the claimant may have parked (mysql_park.go)
		claim       = "INSERT INTO {t} (`key`, owner, fence, holds, ids, expires_at, parked) SELECT ?, ?, 0, 1, ?, {now} + ?, "
		claimFirst  = claim + "0 FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM {q} WHERE `key` = ? AND expires_at > {now})"
		claimQueued = claim + "EXISTS (SELECT 1 FROM {q} WHERE `key` = ? AND token <> ? AND proc <> '' AND expires_at > {now}) " +
			"FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM {q} w WHERE w.`key` = ? AND w.token <> ? AND w.expires_at > {now} AND w.seq < " +
			"COALESCE((SELECT seq FROM {q} WHERE `key` = ? AND token = ?), 18446744073709551615))"
	)
	m := &myStatements{
		insert:       fill(claimFirst),
		insertQueued: fill(claimQueued),
		draw:         fill("UPDATE `{tn}_fence` SET v = LAST_INSERT_ID(v + 1) WHERE id = 1"),
		fence:        fill("UPDATE {t} SET fence = ? WHERE `key` = ? AND owner = ? AND fence = 0 AND ids = ?"),
		// claim, draw and fence in one round trip, where the connection
		// takes several statements at once, each step only if the one
		// before changed a row (ROW_COUNT); a failed statement ends it.
		// batchQueued also takes the waiter out of the queue.
		batch: fill(claimFirst + ";\n" + myDrawFence + "SELECT LAST_INSERT_ID(), ROW_COUNT()"),
		batchQueued: fill(claimQueued + ";\n" + myDrawFence + "SET @locker_f = ROW_COUNT();\n" +
			"DELETE FROM {q} WHERE `key` = ? AND token = ? AND @locker_f > 0;\n" +
			"SELECT LAST_INSERT_ID(), @locker_f"),
		// place takes or keeps a waiter's place for the TTL (seq stays, the
		// LAST_INSERT_ID), naming the process whose park a release wakes
		// (proc: mysql_park.go), and the owner and TTL of the hold that a
		// release may grant it (myXReleaseProc); gc clears lapsed places.
		place: fill("INSERT INTO {q} (`key`, token, expires_at, proc, owner, ttl) VALUES (?, ?, {now} + ?, ?, ?, ?) " +
			"ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at), proc = VALUES(proc), owner = VALUES(owner), ttl = VALUES(ttl), " +
			"seq = LAST_INSERT_ID(seq)"),
		gc:        fill("DELETE FROM {q} WHERE `key` = ? AND expires_at <= {now}"),
		dequeue:   fill("DELETE FROM {q} WHERE `key` = ? AND token = ?"),
		first:     fill("SELECT COALESCE((SELECT token FROM {q} WHERE `key` = ? AND expires_at > {now} ORDER BY seq LIMIT 1), '')"),
		state:     fill(myState(mySeq)),
		reenter:   fill("UPDATE {t} SET holds = holds + ?, ids = ?, expires_at = GREATEST(expires_at, {now} + ?) WHERE `key` = ? AND fence = ? AND ids = ?"),
		lapse:     fill("DELETE FROM {t} WHERE `key` = ? AND fence = ? AND expires_at <= {now}"),
		drop:      fill("DELETE FROM {t}" + match + " AND ids = ?"),
		dec:       fill("UPDATE {t} SET holds = holds - 1, ids = REPLACE(ids, ?, ' ')" + match + " AND INSTR(ids, ?) > 0 AND ids <> ?"),
		has:       fill("SELECT 1 FROM {t}" + match + " AND INSTR(ids, ?) > 0"),
		refresh:   fill("UPDATE {t} SET expires_at = GREATEST(expires_at, {now} + ?)" + match + " AND INSTR(ids, ?) > 0"),
		expire:    fill("DELETE FROM {t} WHERE `key` = ? AND owner = ? AND fence = ? AND expires_at <= {now}"),
		xrelease:  fill(myXRelease),
		claimProc: fill(myClaim),
	}
	m.parkStatements(fill, match)
	// in one round trip where it can be, the place's seq the connection's
	// LAST_INSERT_ID; one in 16 also clears lapsed places
	placed := fill(myState("LAST_INSERT_ID()"))
	m.wait, m.waitGC = m.place+";\n"+m.mark+";\n"+placed, m.place+";\n"+m.gc+";\n"+m.mark+";\n"+placed
	return m
}

// myState reads what a refused claim needs (keyState): the row (or ”, 0,
// ”, 0), until when the first live waiter ahead keeps the key from the
// call (ms; 0: none), the call's place (seq, its seq: mySeq, or where the
// place was just taken on the connection LAST_INSERT_ID()), whether
// Limited holders hold the key, and whether a live waiter ahead is one
// whose grant wakes no park (modal, or of a process that does not park:
// mysql_park.go). The row is joined to the fence table's one row, not to
// a derived table, which costs a temporary table a call (70–130 µs here).
func myState(seq string) string {
	return "SELECT COALESCE(l.owner, ''), COALESCE(l.fence, 0), COALESCE(l.ids, ''), COALESCE(l.expires_at - {now}, 0), " +
		"COALESCE((SELECT MIN(w.expires_at) FROM {q} w WHERE w.`key` = ? AND w.token <> ? AND w.expires_at > {now} AND w.seq < " +
		"COALESCE(" + seq + ", 18446744073709551615)) - {now}, 0), " +
		"COALESCE(" + seq + ", 0), " + strings.ReplaceAll(limitWait, "$1", "?") + ", " +
		"EXISTS (SELECT 1 FROM {q} w WHERE w.`key` = ? AND w.token <> ? AND w.expires_at > {now} AND (w.mode <> 0 OR w.proc = '') AND w.seq < " +
		"COALESCE(" + seq + ", 18446744073709551615))" +
		" FROM `{tn}_fence` x LEFT JOIN {t} l ON l.`key` = ? WHERE x.id = 1"
}

// mySeq is a call's place in the queue, by key and token.
const mySeq = "(SELECT seq FROM {q} WHERE `key` = ? AND token = ?)"

// stateArgs are myState's arguments for key and token; placed: with the
// place's seq read from LAST_INSERT_ID.
func stateArgs(key, token string, placed bool) []any {
	if placed {
		return []any{key, token, key, key, token, key}
	}
	return []any{key, token, key, token, key, token, key, key, token, key, token, key}
}

// myDrawFence draws a fence and gives it to the claim just inserted.
const myDrawFence = "UPDATE `{tn}_fence` SET v = LAST_INSERT_ID(v + 1) WHERE id = 1 AND ROW_COUNT() > 0;\n" +
	"UPDATE {t} SET fence = LAST_INSERT_ID() WHERE `key` = ? AND owner = ? AND fence = 0 AND ids = ? AND ROW_COUNT() > 0;\n"

// myNow is the database's clock in Unix milliseconds, whatever the
// session's time zone.
const myNow = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)"

// myInfo: a row without its fence is a claim between its statements (the
// fence is drawn after the insert), not yet a holder.
const myInfo = "SELECT `key`, owner, fence, holds, expires_at FROM {t} WHERE expires_at > {now} AND fence <> 0"

// mySchema: binary keys and owners compare byte by byte, as on Postgres
// (COLLATE "C") and SQLite. Statements apart: no multi-statement DSN.
const mySchema = "CREATE TABLE IF NOT EXISTS {t} (\n" +
	"	`key` VARBINARY(512) NOT NULL PRIMARY KEY,\n" +
	"	owner VARBINARY(512) NOT NULL,\n" +
	"	fence BIGINT UNSIGNED NOT NULL,\n" +
	"	holds INT NOT NULL,\n" +
	"	ids MEDIUMBLOB NOT NULL,\n" +
	"	expires_at BIGINT NOT NULL,\n" +
	"	parked TINYINT NOT NULL DEFAULT 0\n" +
	") ENGINE=InnoDB;\n" +
	"CREATE TABLE IF NOT EXISTS `{tn}_fence` (id TINYINT NOT NULL PRIMARY KEY, v BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB;\n" +
	"INSERT IGNORE INTO `{tn}_fence` (id, v) VALUES (1, 0);\n" +
	"CREATE TABLE IF NOT EXISTS {q} (\n" +
	"	`key` VARBINARY(512) NOT NULL,\n" +
	"	token VARBINARY(255) NOT NULL,\n" +
	"	seq BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,\n" +
	"	expires_at BIGINT NOT NULL,\n" +
	"	lim INT NOT NULL DEFAULT 0,\n" +
	"	mode TINYINT NOT NULL DEFAULT 0,\n" +
	"	proc VARBINARY(32) NOT NULL DEFAULT '',\n" +
	"	owner VARBINARY(512) NOT NULL DEFAULT '',\n" +
	"	ttl BIGINT NOT NULL DEFAULT 0,\n" +
	"	PRIMARY KEY (`key`, token),\n" +
	"	KEY (seq),\n" +
	"	KEY key_seq (`key`, seq)\n" +
	") ENGINE=InnoDB;\n" +
	"CREATE TABLE IF NOT EXISTS {h} (\n" +
	"	`key` VARBINARY(512) NOT NULL,\n" +
	"	owner VARBINARY(512) NOT NULL,\n" +
	"	mode TINYINT NOT NULL,\n" +
	"	fence BIGINT UNSIGNED NOT NULL,\n" +
	"	holds INT NOT NULL,\n" +
	"	ids MEDIUMBLOB NOT NULL,\n" +
	"	expires_at BIGINT NOT NULL,\n" +
	"	lim INT NOT NULL DEFAULT 0,\n" +
	"	PRIMARY KEY (`key`, owner, mode)\n" +
	") ENGINE=InnoDB;\n" +
	"CREATE TABLE IF NOT EXISTS `{tn}_park` (\n" +
	"	`key` VARBINARY(512) NOT NULL,\n" +
	"	proc VARBINARY(32) NOT NULL,\n" +
	"	conn BIGINT UNSIGNED NOT NULL,\n" +
	"	PRIMARY KEY (`key`, proc)\n" +
	") ENGINE=InnoDB"

// myModeColumns gives tables made by an earlier version the columns they
// lack (MySQL has no ADD COLUMN IF NOT EXISTS): a queue made before lock
// modes its mode column (its waiters are Exclusive); the holders and the
// queue made before limits lim (0: none is Limited); the queue made before
// releases granted other processes' waiters owner and ttl (a place
// without them is not granted: myXReleaseProc). DDL does not wait for
// the transaction, so two Lockers opening at once may both find a column
// missing: the one whose ALTER comes second is told the column exists
// (1060), which is what it wanted.
func myModeColumns(ctx context.Context, tx *dbsql.Tx, table string, fill func(string) string) error {
	for _, c := range []struct{ table, column, add string }{
		{table + "_queue", "mode", "ALTER TABLE {q} ADD COLUMN mode TINYINT NOT NULL DEFAULT 0"},
		{table + "_queue", "lim", "ALTER TABLE {q} ADD COLUMN lim INT NOT NULL DEFAULT 0"},
		{table + "_hold", "lim", "ALTER TABLE {h} ADD COLUMN lim INT NOT NULL DEFAULT 0"},
		{table + "_queue", "proc", "ALTER TABLE {q} ADD COLUMN proc VARBINARY(32) NOT NULL DEFAULT ''"},
		{table, "parked", "ALTER TABLE {t} ADD COLUMN parked TINYINT NOT NULL DEFAULT 0"},
		{table + "_queue", "owner", "ALTER TABLE {q} ADD COLUMN owner VARBINARY(512) NOT NULL DEFAULT ''"},
		{table + "_queue", "ttl", "ALTER TABLE {q} ADD COLUMN ttl BIGINT NOT NULL DEFAULT 0"},
	} {
		var n int
		err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.columns "+
			"WHERE table_schema = DATABASE() AND table_name = ? AND column_name = ?", c.table, c.column).Scan(&n)
		if err == nil && n == 0 {
			_, err = tx.ExecContext(ctx, fill(c.add))
		}
		var my *mysql.MySQLError
		if err != nil && !(errors.As(err, &my) && my.Number == 1060) { // 1060: added meanwhile by another
			return err
		}
	}
	return myQueueIndex(ctx, tx, table, fill)
}

// myQueueIndex gives a queue made by an earlier version its index by key
// and seq, by which a release reads a key's first live waiter at once
// (myXReleaseProc; without it, the key's places sorted, and all locked).
func myQueueIndex(ctx context.Context, tx *dbsql.Tx, table string, fill func(string) string) error {
	var n int
	err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.statistics "+
		"WHERE table_schema = DATABASE() AND table_name = ? AND index_name = 'key_seq'", table+"_queue").Scan(&n)
	if err == nil && n == 0 {
		_, err = tx.ExecContext(ctx, fill("ALTER TABLE {q} ADD INDEX key_seq (`key`, seq)"))
	}
	var my *mysql.MySQLError
	if err != nil && !(errors.As(err, &my) && my.Number == 1061) { // 1061: added meanwhile by another
		return err
	}
	return nil
}

// myStatements are the MySQL statements, filled in for one table. The
// hold id is spaced (" id ") as in ids, which lists a row's hold ids.
type myStatements struct {
	insert, insertQueued, draw, fence, batch, batchQueued, place, gc, dequeue, first, state, wait, waitGC string
	reenter, lapse, drop, dec, has, refresh, expire, xrelease, claimProc                                  string
	park, parkMark, sleep, grantRead, unpark, unparkAll, quiet, mark                                      string // mysql_park.go
	multi                                                                                                 bool   // the connections take batch
}

// multiStatements reports whether db's connections run several statements
// in one query (the DSN's multiStatements=true, which Open sets).
func multiStatements(ctx context.Context, db *dbsql.DB) bool {
	rows, err := db.QueryContext(ctx, "SELECT 1; SELECT 2")
	if err != nil {
		return false
	}
	defer rows.Close()
	for rows.Next() {
	}
	return rows.NextResultSet() && rows.Err() == nil
}

// acquire claims r's key if free (after deleting an expired row) and
// nobody queued ahead of r, and fences the claim; re-enters the key if r's
// owner holds it; else refuses with the holder's time left, or the time
// until the waiter ahead lapses, keeping r's place in the queue if it
// queues. A change by another client between two statements starts over.
func (m *myStatements) acquire(ctx context.Context, d *sqlDriver, r *driver.Request) (driver.Grant, error) {
	id, ttl, token := " "+r.ID+" ", r.TTL.Milliseconds(), d.token(r)
	grant := func(fence uint64, queued bool, err error) (driver.Grant, error) {
		return m.granted(ctx, d, r, token, fence, queued, err)
	}
	// A call refused a moment ago takes its place first: a claim now
	// would most likely be refused again; so does a new call for a hot
	// key (mysql_hot.go).
	c := callOf(r)
	placing := token != "" && c.placed.IsZero() && (c.refused || d.gates.isHot(r.Key, r.TTL/3))
	watch := watcher(d, r, token)
	for ; ; placing = false {
		if !placing {
			fence, fenced, err := m.claim(ctx, d, r, id, ttl, token)
			switch {
			case err == nil && fenced:
				return grant(fence, !m.multi, nil)
			case err != nil && !isDuplicate(err):
				return driver.Grant{}, err
			}
		}
		s, err := m.read(ctx, d, r, token, ttl)
		if err != nil {
			return driver.Grant{}, err
		}
		switch {
		case s.ids == "" && s.ahead > 0: // free, but a waiter comes first
			d.gates.pass(r.Key) // our watch, if it got the name, hands it on
			watch(!s.unparked)  // the next one, behind the others
			return driver.Grant{Retry: time.Duration(s.ahead) * time.Millisecond}, nil
		case s.ids == "": // released meanwhile, or free all along
			d.gates.cool(r.Key)
		case s.left > 0 && s.fence == 0 && s.ids == id: // our claim, its fence lost with a connection
			if fence, ok, err := m.fenceClaim(ctx, d, r, id); err != nil || ok {
				return grant(fence, true, err)
			}
		case s.left > 0 && s.fence == 0 && s.owner == "": // a header: the modal holders' releases wake nobody elsewhere
			return driver.Grant{}, nil // look again soon
		case s.left > 0 && s.fence == 0: // a claim being fenced: held, as good as
			watch(!s.unparked)
			return driver.Grant{Retry: time.Duration(s.left) * time.Millisecond}, nil
		case s.left > 0 && s.owner != r.Owner:
			// A header's holders (owner '') are modal: their releases
			// interrupt no park; nor, later, do those of a modal waiter
			// ahead (unparked), which the holder's release lets in.
			watch(s.owner != "" && !s.unparked)
			return driver.Grant{Retry: time.Duration(s.left) * time.Millisecond}, nil
		case s.left > 0: // ours: re-entered
			if ok, err := m.reenterRow(ctx, d, r, s, ttl); err != nil || ok {
				return grant(s.fence, true, err)
			}
		default: // expired: delete it, then insert anew
			if _, err := d.db.ExecContext(ctx, m.lapse, r.Key, s.fence); err != nil {
				return driver.Grant{}, err
			}
		}
	}
}

// watcher is a refusal's watch: it starts or keeps the key's gate where a
// release will wake the call through it, a park (mysql_park.go) only
// where parks says so.
func watcher(d *sqlDriver, r *driver.Request, token string) func(parks bool) {
	c := callOf(r)
	c.parkable = false
	return func(parks bool) {
		if token != "" && (parks || !d.gates.parks()) {
			c.parkable = true
			d.gates.watch(r.Key, r.TTL)
		}
	}
}

// granted is r's grant of fence, r out of the queue (queued: by a
// statement of its own).
func (m *myStatements) granted(ctx context.Context, d *sqlDriver, r *driver.Request, token string, fence uint64, queued bool, err error) (driver.Grant, error) {
	if err != nil {
		return driver.Grant{}, err
	}
	d.gates.granted(r.Key)
	if queued && token != "" {
		if _, err := d.db.ExecContext(ctx, m.dequeue, r.Key, token); err != nil {
			return driver.Grant{}, err // the hold is taken back (Abandon)
		}
	}
	hd := (&hold{d: d, key: r.Key, owner: r.Owner, id: r.ID, fence: fence, ttl: r.TTL, waited: callOf(r).refused}).written()
	return driver.Grant{Hold: hd, Fence: fence}, nil
}

// reenterRow re-enters the row s of r's owner, gaining r's hold id unless
// it has it: a retry of this call after a lost reply, or a hand-off to it
// not handed over yet, whose hold is the call's grant then (foundOwn). ok
// if the row was as s says.
func (m *myStatements) reenterRow(ctx context.Context, d *sqlDriver, r *driver.Request, s keyState, ttl int64) (bool, error) {
	more, next := !strings.Contains(s.ids, " "+r.ID+" "), s.ids
	if more {
		next += r.ID + " "
	}
	ok, err := affected(d.db.ExecContext(ctx, m.reenter, more, next, ttl, r.Key, s.fence, s.ids))
	if ok && !more {
		d.handoffs.foundOwn(r.ID)
	}
	return ok, err
}

// claim inserts r's row unless a waiter is ahead, and fences it: fenced
// if the key is now r's, with fence (and r has left the queue where a
// batch ran); a duplicate-key error if the key has a row.
func (m *myStatements) claim(ctx context.Context, d *sqlDriver, r *driver.Request, id string, ttl int64, token string) (fence uint64, fenced bool, err error) {
	if token == "" {
		if fence, fenced, done, err := m.claimByProc(ctx, d, r); done {
			return fence, fenced, err
		}
	}
	q, args := m.insert, []any{r.Key, r.Owner, id, ttl, r.Key}
	if token != "" {
		q, args = m.insertQueued, append(args, token, r.Key, token, r.Key, token)
	}
	if !m.multi {
		if ok, err := affected(d.db.ExecContext(ctx, q, args...)); err != nil || !ok {
			return 0, false, err
		}
		return m.fenceClaim(ctx, d, r, id)
	}
	q, args = m.batch, append(args, r.Key, r.Owner, id)
	if token != "" {
		q, args = m.batchQueued, append(args, r.Key, token)
	}
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return 0, false, err
	}
	var n int64
	err = scanLast(rows, &fence, &n)
	return fence, n > 0, err
}

// scanLast scans the rows of a batch's result sets into dest (the last
// row wins) and closes rows.
func scanLast(rows *dbsql.Rows, dest ...any) error {
	defer rows.Close()
	for {
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
		}
		if !rows.NextResultSet() {
			return rows.Err()
		}
	}
}

// fenceClaim draws a fence for the claim r just inserted and gives it to
// the claim if it is still r's.
func (m *myStatements) fenceClaim(ctx context.Context, d *sqlDriver, r *driver.Request, id string) (uint64, bool, error) {
	res, err := d.db.ExecContext(ctx, m.draw)
	if err != nil {
		return 0, false, err
	}
	f, err := res.LastInsertId()
	if err != nil {
		return 0, false, err
	}
	ok, err := affected(d.db.ExecContext(ctx, m.fence, f, r.Key, r.Owner, id))
	return uint64(f), ok, err
}

// release takes h's hold id off its row: the row goes with its last hold,
// else one hold goes. Neither, with the hold still there, is a lost race
// with another release of the owner's: tried again.
func (m *myStatements) release(ctx context.Context, h *hold) (ok, freed bool, err error) {
	id := " " + h.id + " "
	if h.mode == driver.Exclusive && !h.d.handOffOff.Load() {
		next := h.d.nextHere(h)
		if next == nil && !h.waited { // a row no process parked on goes with one plain statement
			if ok, err := affected(h.d.db.ExecContext(ctx, m.quiet, h.key, h.owner, h.fence, h.fence, id)); err != nil || ok {
				return ok, ok, err
			}
		}
		// next nil: the release wakes the park of the process whose
		// waiter is first (mysql_park.go)
		if ok, freed, err := m.handOff(ctx, h, next); err != nil || ok {
			if freed && next == nil && h.waited {
				h.d.gates.heat(h.key)
			}
			return ok, freed, err
		}
	}
	if ok, err := affected(h.d.db.ExecContext(ctx, m.drop, h.key, h.owner, h.fence, h.fence, id)); err != nil || ok {
		return ok, ok, err
	}
	if ok, err := affected(h.d.db.ExecContext(ctx, m.dec, id, h.key, h.owner, h.fence, h.fence, id, id)); err != nil || ok {
		return ok, false, err
	}
	var exists bool
	if err := row(h.d.db.QueryRowContext(ctx, m.has, h.key, h.owner, h.fence, h.fence, id), &exists); err != nil {
		return false, false, err
	}
	if exists {
		return false, false, errRace
	}
	return false, false, nil
}

// refreshOnce extends h's row if it still has the hold. MySQL counts the
// rows an UPDATE changed, not those it matched: an unchanged row (a
// longer expiry already there) is looked for.
func (m *myStatements) refreshOnce(ctx context.Context, h *hold) (bool, error) {
	id := " " + h.id + " "
	ok, err := affected(h.d.db.ExecContext(ctx, m.refresh, h.ttl.Milliseconds(), h.key, h.owner, h.fence, h.fence, id))
	if err != nil || ok {
		return ok, err
	}
	err = row(h.d.db.QueryRowContext(ctx, m.has, h.key, h.owner, h.fence, h.fence, id), &ok)
	return ok, err
}

func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

func affected(res dbsql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// myClassify: deadlocks and lock wait timeouts were not applied and are
// retried; a lost connection may have been applied.
func myClassify(err error) (transient, ambiguous bool) {
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me):
		switch me.Number {
		case 1205, 1213, 1040: // lock wait timeout, deadlock, too many connections
			return true, false
		case 1317: // interrupted: a release's KILL QUERY meant for a park (mysql_park.go) that ended
			return true, true
		case 1053, 2006, 2013, 1927: // server shutdown, gone away, lost connection, connection killed
			return true, true
		}
		return false, false
	case strings.Contains(err.Error(), "sql: database is closed"):
		return false, false
	case errors.Is(err, mysql.ErrInvalidConn), errors.As(err, new(net.Error)):
		return true, true
	}
	return true, true // a failure of the connection that the driver did not name
}
