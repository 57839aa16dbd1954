package sql

import (
	"context"
	"crypto/rand"
	dbsql "database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"

	"github.com/go-sql-driver/mysql"
)

// Parks wake the waiters of one process on a release in another with no
// detour: where this process's connections are the release procedure's
// to interrupt (its definer is this user: parking), a gate holds no named
// lock. It parks a connection of its own, waiting for the process's
// anchor (mysql_anchor.go), recorded in the key's
// park row for this process, and the waiters' places name the process
// (proc). A release that leaves the key free (myXReleaseProc) interrupts,
// once its deletion is committed, the park of the process whose waiter
// comes first in the queue, with KILL QUERY, and takes its park row: that
// process alone is woken, where a named lock goes to the processes in the
// order they asked for it, and on to the next while the one that got it
// has no waiter first. A gate that ends with no waiter takes its row, and
// a Locker's Close its process's: rows do not pile up with the keys a
// process waited for (a crashed process's stay, harmless).
//
// A park waits only while an Exclusive holder keeps the key or, the key
// free, another process's parking waiter comes first (a quarter second at
// most then), asked in the statement that sleeps: a release committed
// before it began is seen, and one after it interrupts it. A waiter whose
// refusal no release will end by a park (behind modal holders or waiters,
// or of a process that does not park) polls (gates.quiet); so does one
// refused by an Exclusive holder with a modal waiter ahead of it, whose
// grant the holder's release lets in and whose own release interrupts
// no park. A waiter
// refused again parks its gate again; a gate whose waiters have
// all gone stays parked until it is woken or its time is up (the next
// waiter here finds it parked), or its room is wanted for another key.
//
// A release interrupts only a park's connection: each holds the named
// lock parkLock+its id for as long as it lives, where a park row outlives
// its connection (a crashed process's, or one whose id a restarted
// server gave to another client); IS_USED_LOCK spares the release a scan
// of the process list. The check and the KILL are two steps, so a gate's
// connections are never given back to the pool, which would run another
// statement on them, but kept for the next park (at most lotSize idle,
// the others closed): such a late KILL wakes a park for nothing, and its
// waiter looks once more. A connection per key waited for, lotSize
// more and the anchor's are outside the pool's count of idle
// connections, within its MaxOpenConns (gates.room).
const lotSize = 2

// parkLock, followed by a connection's id, names the lock that marks the
// connection as a park's: a release interrupts no other (myXReleaseProc).
const parkLock = "locker park "

// parkConn is a connection kept by gates, and its id in the server.
type parkConn struct {
	conn *dbsql.Conn
	id   int64
}

// parkStatements fills in the parks' statements. quiet releases a row no
// waiter of a parking process marked (match finds the hold's row), with
// one plain statement. park records the connection in the key's park row,
// and parkMark marks the key's row: the mark waits for a release that
// holds the row, so that the look after it sees that release. sleep
// waits for the anchor (mysql_anchor.go) while what keeps the key from
// this process's waiter will interrupt the park as it goes: an Exclusive
// holder other than the first waiter here, whom a release may have granted
// the key before the park began (a header, owner ”, stands for modal
// holders, whose releases interrupt no park); or, the key free, another
// process's parking waiter first; and only while the park row it wrote is
// there, which a release takes before its KILL (sleepArgs); tagged, as a
// release interrupts only a connection that runs it. grantRead reads the
// grant a release may have left to a waiter here (gates.look). unpark and
// unparkAll forget parks.
func (m *myStatements) parkStatements(fill func(string) string, match string) {
	m.quiet = fill("DELETE FROM {t}" + match + " AND ids = ? AND parked = 0")
	// mark: a waiter of a parking process (proc ?, else '') marks the row
	// as it takes its place, so that the row's release wakes it, whether
	// or not a park of its process is on its way
	m.mark = fill("UPDATE {t} SET parked = 1 WHERE `key` = ? AND parked = 0 AND ? <> ''")
	m.park = fill("INSERT INTO `{tn}_park` (`key`, proc, conn) VALUES (?, ?, CONNECTION_ID()) ON DUPLICATE KEY UPDATE conn = VALUES(conn)")
	m.parkMark = fill("UPDATE {t} SET parked = 1 WHERE `key` = ?")
	m.sleep = fill("SELECT /* locker park */ CASE WHEN NOT EXISTS (SELECT 1 FROM `{tn}_park` WHERE `key` = ? AND proc = ? AND conn = CONNECTION_ID()) THEN 0 " +
		"WHEN EXISTS (SELECT 1 FROM {t} WHERE `key` = ? AND expires_at > {now} AND owner <> '' AND ids <> CONCAT(' ', ?, ' ')) " +
		"THEN GET_LOCK(?, ?) " +
		"WHEN NOT EXISTS (SELECT 1 FROM {t} WHERE `key` = ? AND expires_at > {now}) AND " +
		"COALESCE((SELECT proc FROM {q} WHERE `key` = ? AND expires_at > {now} ORDER BY seq LIMIT 1), '') NOT IN ('', ?) " +
		"THEN GET_LOCK(?, LEAST(?, " + parkFree + ")) ELSE 0 END")
	m.grantRead = fill("SELECT ids, owner, fence, expires_at - {now} FROM {t} WHERE `key` = ? AND expires_at > {now} AND fence <> 0 AND holds = 1")
	m.unparkAll = fill("DELETE FROM `{tn}_park` WHERE proc = ?")
	m.unpark = fill("DELETE FROM `{tn}_park` WHERE `key` = ? AND proc = ? AND conn = CONNECTION_ID()")
}

// parkFree is how long a park sleeps while the key is free and another
// process's waiter comes first (s): one that gives up leaves the queue
// with no release, which interrupts nobody.
const parkFree = "0.25"

// parks reports whether the gates park.
func (gs *gates) parks() bool { return gs != nil && gs.parking.Load() }

// stopParking: a release here may no longer interrupt parks (the
// procedure went): the parked gates end, and gates watch names from now
// on.
func (gs *gates) stopParking() {
	if gs == nil || !gs.parking.CompareAndSwap(true, false) {
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for _, g := range gs.keys {
		if g.parks {
			g.cancel()
		}
	}
	gs.dropAnchor(nil)
}

// procID is the name of this process's parks in the waiters' places, or
// "" where a release does not wake them (gates, nil or watching names).
func (gs *gates) procID() string {
	if !gs.parks() {
		return ""
	}
	return gs.proc
}

// killable reports whether a release's KILL, run as the definer of the
// release procedure, may interrupt this user's connections: the definer
// is this user. (Another's may too, with CONNECTION ADMIN; it is not
// counted on.)
func killable(ctx context.Context, db *dbsql.DB, proc string) bool {
	var same bool
	err := db.QueryRowContext(ctx, "SELECT COALESCE((SELECT DEFINER = CURRENT_USER() FROM information_schema.ROUTINES "+
		"WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = ?), FALSE)", proc).Scan(&same)
	return err == nil && same
}

func newProcID() string { return rand.Text()[:16] }

// runParked is a parking gate's life: park, wake the first waiter here,
// and park again when a waiter here is refused (rearm), until none is.
func (gs *gates) runParked(ctx context.Context, key string, g *gate) {
	defer g.cancel()
	pc, err := gs.take(ctx)
	if err != nil {
		gs.end(key, g, true)
		return
	}
	clean := false
	defer func() { gs.put(pc, clean) }()
	gs.mu.Lock()
	g.conn = pc.id
	gs.mu.Unlock()
	timeout := math.Ceil(g.ttl.Seconds())
	// unpark takes the park row as the gate ends, unless the release that
	// interrupted the park took it
	rowLeft := false
	unpark := func() {
		if clean && rowLeft {
			_, _ = pc.conn.ExecContext(ctx, gs.sql.unpark, key, gs.proc)
		}
	}
	for {
		woken, err := gs.park(ctx, pc, key, timeout)
		clean = err == nil || interrupted(err)
		if woken || interrupted(err) {
			gs.woken.Add(1)
		}
		gs.mu.Lock()
		rowLeft = !woken && !interrupted(err) || g.reclaim // a reclaim interrupts without taking it
		g.waiting = false
		idle := gs.local.first(key) == ""
		if !clean || idle || ctx.Err() != nil {
			gs.endLocked(key, g)
			gs.mu.Unlock()
			if idle {
				unpark()
			}
			gs.wake(key)
			return
		}
		gs.mu.Unlock()
		gs.look(ctx, pc, key) // a grant a release left to a waiter here, handed over
		gs.wake(key)
		select { // the waiter looks; refused, it parks the gate again
		case <-g.next:
		case <-ctx.Done():
			gs.end(key, g, false)
			return
		}
		gs.mu.Lock()
		if gs.local.first(key) == "" { // gone meanwhile
			gs.endLocked(key, g)
			gs.mu.Unlock()
			unpark()
			return
		}
		g.waiting = true
		gs.mu.Unlock()
	}
}

// park records pc as this process's park for key and waits on it (see
// parkStatements). It reports woken where GET_LOCK answers NULL for a
// KILL; MariaDB fails the statement instead (interrupted).
//
// One statement at a time, though the connection takes several: a KILL
// that MariaDB gets between two statements of one query ends the query
// with no further packet, after the last answer said more were coming,
// and the driver waits for them for good (traced: the park's connection
// idle in the server, its goroutine reading in NextResultSet; a waiter
// whose release it missed waited for its own look a TTL/3 later, 1 run in
// 50-80 of TestFastLaneUnderAReadMix/MySQL). Between two queries the KILL
// interrupts nothing, or the next one, and the sleep then finds its row
// taken.
func (gs *gates) park(ctx context.Context, pc *parkConn, key string, timeout float64) (woken bool, err error) {
	anchor, err := gs.anchored(ctx)
	if err != nil {
		return false, err
	}
	if _, err := pc.conn.ExecContext(ctx, gs.sql.park, key, gs.proc); err != nil {
		return false, err
	}
	if _, err := pc.conn.ExecContext(ctx, gs.sql.parkMark, key); err != nil {
		return false, err
	}
	var got dbsql.NullInt64
	switch err = pc.conn.QueryRowContext(ctx, gs.sql.sleep, gs.sleepArgs(key, timeout)...).Scan(&got); {
	case err != nil:
		return false, err
	case !got.Valid:
		return true, nil
	case got.Int64 == 1: // the anchor's connection is gone: the next park takes a new one
		_, err = pc.conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", gs.anchorName())
		gs.dropAnchor(anchor)
		return false, err
	}
	return false, nil
}

// sleepArgs are the arguments of the statement that sleeps (parkStatements)
// on key for at most timeout seconds.
func (gs *gates) sleepArgs(key string, timeout float64) []any {
	anchor := gs.anchorName()
	return []any{key, gs.proc, key, gs.local.first(key), anchor, timeout, key, key, gs.proc, anchor, timeout}
}

// interrupted: a statement ended by KILL QUERY (MariaDB; MySQL's
// GET_LOCK answers NULL instead).
func interrupted(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && my.Number == 1317
}

// take is a kept connection, or a new one from the pool.
func (gs *gates) take(ctx context.Context) (*parkConn, error) {
	gs.mu.Lock()
	if n := len(gs.lot); n > 0 {
		pc := gs.lot[n-1]
		gs.lot = gs.lot[:n-1]
		gs.mu.Unlock()
		return pc, nil
	}
	gs.mu.Unlock()
	conn, err := gs.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	pc := &parkConn{conn: conn}
	var got dbsql.NullInt64
	err = conn.QueryRowContext(ctx, "SELECT CONNECTION_ID(), GET_LOCK(CONCAT('"+parkLock+"', CONNECTION_ID()), 0)").Scan(&pc.id, &got)
	if err == nil && got.Int64 != 1 {
		err = fmt.Errorf("locker: the named lock of park connection %d is taken", pc.id)
	}
	if err != nil {
		closeBad(conn)
		return nil, err
	}
	return pc, nil
}

// put keeps pc for the next park, or closes it: never back to the pool.
func (gs *gates) put(pc *parkConn, clean bool) {
	gs.mu.Lock()
	if clean && len(gs.lot) < lotSize && gs.ctx.Err() == nil {
		gs.lot = append(gs.lot, pc)
		gs.mu.Unlock()
		return
	}
	gs.mu.Unlock()
	closeBad(pc.conn)
}

// closeBad closes conn, and the pool with it forgets the connection.
func closeBad(conn *dbsql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

// reclaim interrupts a gate parked with no waiter here, so that its room
// goes to another key. Called with gs.mu held.
func (gs *gates) reclaimLocked() {
	for key, g := range gs.keys {
		if g.parks && g.waiting && !g.reclaim && gs.local.first(key) == "" && g.conn != 0 {
			g.reclaim = true
			id := g.conn
			go func() { _, _ = gs.db.ExecContext(gs.ctx, fmt.Sprintf("KILL QUERY %d", id)) }()
			return
		}
	}
}
