package sql

import (
	"context"
	dbsql "database/sql"
	"fmt"
)

// A park (mysql_park.go) waits in GET_LOCK for its process's anchor: a
// named lock that one connection of the process holds for as long as the
// process parks, so that the wait lasts until a release's KILL QUERY
// interrupts it or its time is up.
//
// Not SLEEP: MariaDB's SLEEP waits on one mutex for the whole server,
// and a KILL of a sleeper that finds it taken (another park on its way in
// or out) retries it for 2 s while holding the sleeper's kill lock, which
// the woken sleeper, holding that mutex, waits for: the release, and every
// park of the server, stood still 2 s at once (measured: 16 parks and 4
// killers on SLEEP, a KILL's median 1.93 s; on GET_LOCK, 0.19 ms, at most
// 3.8 ms). A named lock's wait has a mutex of its own.
//
// The anchor is one connection of the pool, out of it for the process's
// life (the gates leave it room: gates.room); a park that gets the name
// finds the anchor's connection gone, lets the name go, and the next park
// takes a new one.
const anchorLock = "locker anchor "

// anchorName is the name this process's parks wait for.
func (gs *gates) anchorName() string { return anchorLock + gs.proc }

// anchored is the connection that holds the anchor, taken now if none
// does; none once the gates are closed.
func (gs *gates) anchored(ctx context.Context) (*dbsql.Conn, error) {
	gs.anchorMu.Lock()
	defer gs.anchorMu.Unlock()
	if gs.anchor != nil {
		return gs.anchor, nil
	}
	if err := gs.ctx.Err(); err != nil {
		return nil, err
	}
	conn, err := gs.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var got dbsql.NullInt64
	err = conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", gs.anchorName()).Scan(&got)
	if err == nil && got.Int64 != 1 {
		err = fmt.Errorf("locker: the park anchor %q is taken", gs.anchorName())
	}
	if err != nil {
		closeBad(conn)
		return nil, err
	}
	gs.anchor = conn
	return conn, nil
}

// dropAnchor closes the anchor's connection if it is still conn (any,
// if conn is nil), and with it lets the name go.
func (gs *gates) dropAnchor(conn *dbsql.Conn) {
	gs.anchorMu.Lock()
	a := gs.anchor
	if a == nil || conn != nil && a != conn {
		gs.anchorMu.Unlock()
		return
	}
	gs.anchor = nil
	gs.anchorMu.Unlock()
	closeBad(a)
}

// room is how many gates may be at once: half the pool, less the
// anchor's connection while they park.
func (gs *gates) room() int {
	if gs.parking.Load() {
		return max(gs.max-1, 0)
	}
	return gs.max
}
