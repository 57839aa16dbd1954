package sql

import (
	"context"
	"crypto/sha256"
	dbsql "database/sql"
	"database/sql/driver"
	"encoding/hex"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locker-go/locker/internal/wait"
)

// gates carry MySQL's hand-off between processes, which LISTEN/NOTIFY
// carries on Postgres: by parks (mysql_park.go) where the release
// procedure may interrupt this process's connections, else, as follows,
// through one named lock per key (GET_LOCK). A
// process's first waiter for a key held elsewhere watches the name: a
// connection of the pool blocks in GET_LOCK. A process that got the key
// after watching keeps the name while it holds the key, and lets it go
// right after its release deleted the row: the server grants the name to
// the process that has watched longest, whose first waiter tries at once.
//
// The name only wakes; the row and the queue decide who gets the key. A
// holder that did not watch holds no name: the first watcher then gets
// it at once, and polls (it keeps the name, so that the next hand-off is
// woken), until a waiter of another process comes first: its own refused
// waiters pass the name on then. A name whose holder is paused outlasts its row: watchers then
// try on their waiters' own schedule (a TTL/3 apart). Gates are at most
// half the pool; a waiter past that polls.
type gates struct {
	db      *dbsql.DB
	table   string // database and table, which name the named locks
	max     int
	hub     *wait.Hub
	local   *localQueue
	sql     *myStatements   // first: the key's first live waiter's token, or ''; multi; park, sleep (the park's wait), unpark
	parking atomic.Bool     // gates park (mysql_park.go) and watch no name
	proc    string          // this process's parks' name
	ctx     context.Context // ends with the last Locker on db and table
	stop    context.CancelFunc

	mu     sync.Mutex
	keys   map[string]*gate
	held   map[string]bool      // keys this process holds: their releases here wake the waiters here
	lot    []*parkConn          // parking: connections kept for the next park
	hot    map[string]time.Time // keys whose releases here left them to waiters elsewhere (mysql_hot.go)
	handed map[string]string    // keys a release here is handing to a waiter here, by key: the waiter (mysql_handoff.go)

	anchorMu sync.Mutex
	anchor   *dbsql.Conn // parking: holds the name the parks wait for (mysql_anchor.go)

	woken atomic.Int64 // parks a release interrupted, for tests and telemetry
}

// gate is one key's watch.
type gate struct {
	name    string
	ttl     time.Duration // the waiter's: GET_LOCK gives up after it
	waiting bool          // GET_LOCK is blocked
	holding bool          // the name is this process's
	adopted bool          // and this process holds the key: keep the name until the row goes
	next    chan bool     // while holding: let go (true: watch again if a waiter is here); parking: look again
	parks   bool          // the gate parks (mysql_park.go), not watching the name
	conn    int64         // parking: the connection's id in the server
	reclaim bool          // parking: its room is wanted (reclaimLocked)
	cancel  context.CancelFunc
}

func newGates(db *dbsql.DB, table string, m *myStatements, parking bool, hub *wait.Hub, local *localQueue) *gates {
	n := db.Stats().MaxOpenConnections / 2  // a pool of 1 has no gate: its waiters poll
	if db.Stats().MaxOpenConnections == 0 { // no bound
		n = urlPoolSize
	}
	ctx, stop := context.WithCancel(context.Background())
	gs := &gates{db: db, table: table, max: n, hub: hub, local: local, sql: m, proc: newProcID(),
		ctx: ctx, stop: stop, keys: map[string]*gate{}, held: map[string]bool{}}
	gs.parking.Store(parking)
	return gs
}

// wake wakes key's first waiter here, reporting whether there is one.
func (gs *gates) wake(key string) bool { return gs.local.wake(gs.hub, key) }

// name is key's named lock, by database, table and key: at most 64
// characters, whatever the key.
func (gs *gates) name(key string) string {
	h := sha256.Sum256([]byte(gs.table + "\x00" + key))
	return "locker:" + hex.EncodeToString(h[:20])
}

// watch starts a gate for key, unless there is one, or as many as may be.
func (gs *gates) watch(key string, ttl time.Duration) {
	if gs == nil {
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g := gs.keys[key]; g != nil && g.parks && !g.waiting {
		sendOnce(g.next, true) // park again
	}
	if gs.keys[key] != nil || gs.held[key] || gs.ctx.Err() != nil {
		return
	}
	if len(gs.keys) >= gs.room() {
		if gs.parking.Load() {
			gs.reclaimLocked() // for the next time
		}
		return
	}
	ctx, cancel := context.WithCancel(gs.ctx)
	g := &gate{name: gs.name(key), ttl: ttl, waiting: true, next: make(chan bool, 1), cancel: cancel, parks: gs.parking.Load()}
	gs.keys[key] = g
	if g.parks {
		go gs.runParked(ctx, key, g)
		return
	}
	go gs.run(ctx, key, g)
}

// run is a gate's life: watch, hold, let go, and again while a waiter is
// here. Its connection goes back to the pool when it holds no name, and
// is closed when that is not sure.
func (gs *gates) run(ctx context.Context, key string, g *gate) {
	defer g.cancel()
	conn, err := gs.db.Conn(ctx)
	if err != nil {
		gs.end(key, g, true)
		return
	}
	clean := false
	defer func() {
		if !clean {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = conn.Close()
	}()
	timeout := math.Ceil(g.ttl.Seconds())
	for {
		got, first, err := gs.getLock(ctx, conn, key, g.name, timeout)
		if err != nil || !got {
			clean = err == nil
			gs.end(key, g, true) // the waiter tries, and watches again or polls
			return
		}
		if !gs.hold(ctx, conn, key, g, first, timeout) {
			return
		}
		var again bool
		select {
		case again = <-g.next:
		case <-ctx.Done():
			return
		}
		_, err = conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", g.name)
		clean = err == nil
		gs.mu.Lock()
		g.holding, g.adopted = false, false
		if !clean || !again || gs.local.first(key) == "" {
			gs.endLocked(key, g)
			gs.mu.Unlock()
			return
		}
		g.waiting = true
		gs.mu.Unlock()
	}
}

// hold decides what the name, just granted, is for, by the queue's first
// waiter: this process's holder keeps it; a waiter here whose turn it is
// is woken; else it goes on at once to the next process that watches,
// this one watching again behind it. With no other process watching, the
// first waiter here polls, and the name stays (the next hand-off is then
// woken). It reports whether the name is held, to be let go on next.
func (gs *gates) hold(ctx context.Context, conn *dbsql.Conn, key string, g *gate, first string, timeout float64) bool {
	for {
		switch gs.use(key, g, first) {
		case keepName:
			return true
		case dropName:
			_, _ = conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", g.name)
			return false
		}
		// Another process's waiter comes first: hand the name on.
		if _, err := conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", g.name); err != nil {
			gs.end(key, g, true)
			return false
		}
		got, _, err := gs.getLock(ctx, conn, key, g.name, 0)
		if err == nil && got { // nobody else watches: the first here polls, holding the name
			gs.mu.Lock()
			gs.wake(key)
			gs.mu.Unlock()
			return true
		}
		if err == nil {
			gs.mu.Lock()
			g.holding, g.waiting = false, true
			gs.mu.Unlock()
			got, first, err = gs.getLock(ctx, conn, key, g.name, timeout)
		}
		if err != nil || !got {
			gs.end(key, g, true)
			return false
		}
	}
}

const (
	keepName = iota
	dropName
	passName
)

// use marks g as holding the name and says what for (see hold).
func (gs *gates) use(key string, g *gate, first string) int {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g.waiting, g.holding = false, true
	switch {
	case g.adopted:
		return keepName
	case first != "" && gs.local.has(key, first):
		gs.hub.Notify(first)
		return keepName
	case gs.local.first(key) == "":
		gs.endLocked(key, g)
		return dropName
	case first == "": // no place yet: the first here tries
		gs.wake(key)
		return keepName
	}
	return passName
}

// getLock runs GET_LOCK(name, timeout) on conn and, if it got the name,
// reads the key's first live waiter: in one round trip where it can.
func (gs *gates) getLock(ctx context.Context, conn *dbsql.Conn, key, name string, timeout float64) (got bool, first string, err error) {
	var n dbsql.NullInt64
	if gs.sql.multi {
		rows, err := conn.QueryContext(ctx, "SELECT GET_LOCK(?, ?), '';\n"+gs.sql.first, name, timeout, key)
		if err != nil {
			return false, "", err
		}
		var tok string
		for i := 0; ; i++ {
			for rows.Next() {
				if i == 0 {
					err = rows.Scan(&n, &tok)
				} else {
					err = rows.Scan(&tok)
				}
				if err != nil {
					rows.Close()
					return false, "", err
				}
			}
			if !rows.NextResultSet() {
				break
			}
		}
		if err := rows.Close(); err != nil {
			return false, "", err
		}
		return n.Int64 == 1, tok, rows.Err()
	}
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", name, timeout).Scan(&n); err != nil || n.Int64 != 1 {
		return false, "", err
	}
	err = conn.QueryRowContext(ctx, gs.sql.first, key).Scan(&first)
	return true, first, err
}

// end forgets g, and wakes key's first waiter here if wake.
func (gs *gates) end(key string, g *gate, wake bool) {
	gs.mu.Lock()
	gs.endLocked(key, g)
	gs.mu.Unlock()
	if wake {
		gs.wake(key)
	}
}

func (gs *gates) endLocked(key string, g *gate) {
	g.waiting, g.holding = false, false
	if gs.keys[key] == g {
		delete(gs.keys, key)
	}
}

// granted: this process holds key now; its gate, if any, keeps the name
// until the row goes.
func (gs *gates) granted(key string) {
	if gs == nil {
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.held[key] = true
	switch g := gs.keys[key]; {
	case g == nil:
	case !g.parks:
		g.adopted = true
	case !g.waiting:
		sendOnce(g.next, true) // park again for the waiters here behind
	}
}

// freed: this process's row for key is gone (released, expired, lost):
// the name goes to the next watcher, and this gate watches again if a
// waiter is here.
func (gs *gates) freed(key string) {
	if gs == nil {
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	delete(gs.held, key)
	if g := gs.keys[key]; g != nil {
		g.adopted = false
		if g.holding {
			sendOnce(g.next, true)
		}
	}
}

// pass: the key is free, but a waiter of another process comes first:
// the name goes on to it (the waiter here polls meanwhile).
func (gs *gates) pass(key string) {
	if gs == nil {
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g := gs.keys[key]; g != nil && g.holding && !g.adopted {
		sendOnce(g.next, false)
	}
}

// left: no waiter of key is here any more; a gate not kept by a hold ends.
func (gs *gates) left(key string) {
	if gs == nil {
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	switch g := gs.keys[key]; {
	case g == nil || g.adopted:
	case g.parks && g.waiting: // parked: it stays, for the next waiter here
	case g.waiting:
		g.cancel()
	default:
		sendOnce(g.next, false)
	}
}

func sendOnce(c chan bool, v bool) {
	select {
	case c <- v:
	default:
	}
}

// quiet reports whether a release will wake key's first waiter here: this
// process holds the key, or a gate of key waits for the name or is
// parked. It then needs no poll.
//
// A park wakes only a call whose refusal a release will end by
// interrupting it (parkable: mysql_park.go); any other polls.
func (gs *gates) quiet(key string, parkable bool) bool {
	if gs == nil {
		return false
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.keys[key]
	return gs.held[key] || g != nil && g.waiting && (!g.parks || parkable && gs.parking.Load())
}

// close ends every gate; their connections close, and with them the names.
func (gs *gates) close() {
	if gs == nil {
		return
	}
	gs.stop()
	gs.mu.Lock()
	lot := gs.lot
	gs.lot = nil
	gs.mu.Unlock()
	for _, pc := range lot {
		closeBad(pc.conn)
	}
	gs.dropAnchor(nil)
	if gs.sql != nil && gs.sql.unparkAll != "" { // this process's park rows, as it may (a crash leaves them: harmless, see mysql_park.go)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = gs.db.ExecContext(ctx, gs.sql.unparkAll, gs.proc)
	}
}
