package sql

import (
	"context"
	"strings"
	"time"

	"github.com/locker-go/locker/driver"
)

// MySQL's hand-off (handoff.go): a release of an Exclusive hold whose row
// a waiter marked, or while a waiter of this process is first for the key
// here, runs myXRelease, which takes the hold's row and, in the same
// transaction, gives it to the first live waiter of the database's queue
// (a fence drawn for it, its place gone) if that waiter is Exclusive and
// its place says whose it is (owner, TTL: older versions' places do not),
// else deletes it. A waiter of this process that the caller named (next)
// is then told its grant here and takes it with no statement of its own;
// a gate watching names keeps the key's name (the key stays this
// process's), so no other process is woken for nothing. Another's is told
// by the interrupt of its process's park (mysql_park.go), whose gate reads
// the grant (gates.look) and hands it over: one read where its waiter would
// otherwise claim the key, six statements. A key left free interrupts the
// park of the process whose waiter is first. A hold that did not wait, on
// a row no waiter of a parking process marked, goes with one plain
// DELETE; a hold of several ids with the plain statements.
const (
	myXReleaseName = "_xrelease_v4"
	myXRelease     = "CALL `{tn}" + myXReleaseName + "`(?, ?, ?, ?, ?, ?, ?)"
	myXReleaseProc = "CREATE PROCEDURE `{tn}" + myXReleaseName + "`(p_key VARBINARY(512), p_owner VARBINARY(512), p_fence BIGINT UNSIGNED, " +
		"p_id VARBINARY(255), p_next VARBINARY(255), p_next_owner VARBINARY(512), p_ttl BIGINT)\n" +
		"BEGIN\n" +
		"	DECLARE n BIGINT;\n" +
		"	DECLARE f BIGINT UNSIGNED DEFAULT 0;\n" +
		"	DECLARE c BIGINT UNSIGNED DEFAULT 0;\n" +
		"	DECLARE pr VARBINARY(32) DEFAULT '';\n" +
		"	DECLARE w VARBINARY(255) DEFAULT '';\n" +
		"	DECLARE wo VARBINARY(512) DEFAULT '';\n" +
		"	DECLARE wt BIGINT DEFAULT 0;\n" +
		"	DECLARE s BIGINT UNSIGNED;\n" +
		"	DECLARE m TINYINT;\n" +
		"	DECLARE CONTINUE HANDLER FOR NOT FOUND SET s = NULL;\n" +
		"	DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\n" +
		"	SET TRANSACTION ISOLATION LEVEL READ COMMITTED;\n" +
		"	START TRANSACTION;\n" +
		"	SET n = {now};\n" +
		// The queue before the row, in the order a claim locks them: the
		// first live waiter (read by the index on key and seq, then its
		// place locked and read again). A lapsed place renewed between the
		// two is passed over, as it would be a moment later; one locking
		// read, ORDER BY seq LIMIT 1 FOR UPDATE, measured no faster, and a
		// check for a waiter come before it 2% slower.
		"	SELECT token INTO w FROM {q} WHERE `key` = p_key AND expires_at > n ORDER BY seq LIMIT 1;\n" +
		"	SET s = NULL;\n" +
		"	IF w <> '' AND w <> p_id THEN\n" +
		"		SELECT seq, mode, owner, ttl, proc INTO s, m, wo, wt, pr FROM {q} WHERE `key` = p_key AND token = w AND expires_at > n FOR UPDATE;\n" +
		"	END IF;\n" +
		"	IF w = p_next THEN\n" +
		"		SET wo = p_next_owner, wt = p_ttl;\n" +
		"	END IF;\n" +
		"	IF s IS NOT NULL AND m = 0 AND wo <> '' AND wt > 0 AND (pr <> '' OR w = p_next) THEN\n" +
		"		UPDATE `{tn}_fence` SET v = LAST_INSERT_ID(v + 1) WHERE id = 1;\n" +
		"		SET f = LAST_INSERT_ID();\n" +
		"		UPDATE {t} SET owner = wo, fence = f, holds = 1, ids = CONCAT(' ', w, ' '), expires_at = n + wt\n" +
		"			WHERE `key` = p_key AND owner = p_owner AND (p_fence = 0 OR fence = p_fence) AND ids = CONCAT(' ', p_id, ' ');\n" +
		"	ELSE\n" +
		"		DELETE FROM {t} WHERE `key` = p_key AND owner = p_owner AND (p_fence = 0 OR fence = p_fence) AND ids = CONCAT(' ', p_id, ' ');\n" +
		"	END IF;\n" +
		"	IF ROW_COUNT() = 0 THEN\n" +
		"		ROLLBACK;\n" +
		"		SELECT 0, 0, '';\n" +
		"	ELSE\n" +
		"		IF f > 0 THEN\n" +
		"			DELETE FROM {q} WHERE `key` = p_key AND token = w;\n" +
		"		ELSE\n" +
		"			SET pr = '';\n" +
		// The key is free: the park of the process whose waiter is first.
		"			SELECT proc INTO pr FROM {q} WHERE `key` = p_key AND expires_at > n AND proc <> '' ORDER BY seq LIMIT 1;\n" +
		"		END IF;\n" +
		// The park of the process woken (none for a grant to next, told
		// here), interrupted once the transaction is committed, its row
		// taken (a park writes it anew). A park that this misses marks
		// the row first, which waits for the commit (the row is locked):
		// its sleep then finds the key free, or held by its own first
		// waiter, and does not sleep.
		"		IF pr <> '' AND (f = 0 OR w <> p_next) THEN\n" +
		"			SELECT conn INTO c FROM `{tn}_park` WHERE `key` = p_key AND proc = pr FOR UPDATE;\n" +
		"			IF c > 0 THEN\n" +
		"				DELETE FROM `{tn}_park` WHERE `key` = p_key AND proc = pr;\n" +
		"			END IF;\n" +
		"		END IF;\n" +
		"		COMMIT;\n" +
		// Only a park's connection (it holds the named lock parkLock):
		// after a restart of the server, an id of the park row may name
		// another client's. A park of a version before v3 holds none: the
		// process list, scanned only then, shows it running one.
		"		IF c > 0 AND c <> CONNECTION_ID() THEN\n" +
		"			IF IS_USED_LOCK(CONCAT('" + parkLock + "', c)) = c OR\n" +
		"				EXISTS (SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = c AND INFO LIKE '%locker park%') THEN\n" +
		"				BEGIN\n" +
		"					DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END; -- gone, or not ours to interrupt: it looks on its own\n" +
		"					KILL QUERY c;\n" +
		"				END;\n" +
		"			END IF;\n" +
		"		END IF;\n" +
		"		SELECT 1, f, w;\n" +
		"	END IF;\n" +
		"END"
)

// nextHere is the waiter that h's release may hand the key to: this
// process's first waiter for h's key, if it waits in Exclusive mode with
// a place in the database's queue; else nil.
func (d *sqlDriver) nextHere(h *hold) *driver.Request {
	if d.handOffOff.Load() {
		return nil
	}
	r := d.firstHere(h)
	if r == nil || d.modal(r) || d.token(r) == "" {
		return nil
	}
	return r
}

// firstHere is this process's first waiter for h's key, while it waits,
// if h is an Exclusive hold and the waiter is another call's; else nil:
// whom h's release may hand the key to (nextHere, nextDirect).
func (d *sqlDriver) firstHere(h *hold) *driver.Request {
	if h.mode != driver.Exclusive || d.local == nil || d.hub == nil || d.handoffs == nil {
		return nil
	}
	id := d.local.first(h.key)
	if id == "" || id == h.id {
		return nil
	}
	if r := d.local.request(h.key, id); r != nil && d.hub.Waiting(id) {
		return r
	}
	return nil
}

// handOff releases h, handing the key to the first live waiter of the
// database's queue (see myXRelease): ok if h's row went, freed if nobody
// here was given the key. A grant to next, this process's first waiter, is
// handed over here; another's, by its process's gate. ok false: h's row
// was not there as one hold (several ids, or gone), or the procedure is
// not to be had here (handOffOff, from then on; the fast lane's
// procedures may still be): the plain release looks.
func (m *myStatements) handOff(ctx context.Context, h *hold, next *driver.Request) (ok, freed bool, err error) {
	var done int
	var fence uint64
	var to string
	start := time.Now() // the grant is valid from no earlier than this
	nextID, nextOwner, nextTTL := "", "", int64(0)
	if next != nil {
		nextID, nextOwner, nextTTL = next.ID, next.Owner, next.TTL.Milliseconds()
		// this process's gate, looking meanwhile, leaves next's grant to
		// the hand-over below: had it handed it over first, the waiter
		// might take it, and even release it, before the hand-over came,
		// which would take it for an orphan's and release it again
		defer h.d.gates.handing(h.key, next.ID)()
	}
	err = row(h.d.db.QueryRowContext(ctx, m.xrelease, h.key, h.owner, h.fence, h.id, nextID, nextOwner, nextTTL), &done, &fence, &to)
	if err != nil {
		if myNoLane(err) { // not to be had here: the plain release, from now on
			h.d.handOffOff.Store(true)
			h.d.gates.stopParking()
			return false, false, nil
		}
		return false, false, err
	}
	if fence > 0 && next != nil && to == next.ID {
		h.d.handOver(ctx, h.key, []handed{{id: next.ID, owner: next.Owner, fence: fence}}, start)
	}
	// freed: nobody here was given the key, so the waiters here look (and
	// park, behind another process's grant)
	return done == 1, done == 1 && (fence == 0 || to != nextID), nil
}

// look reads, after key's park ended, whether a release granted the key
// to a waiter here (myXReleaseProc), and hands that grant over: the
// waiter then takes it with no statement of its own. The grant is valid
// from when its row's TTL began, as the row tells (its time left, counted
// from before the read): the release ran at no known moment before.
// Nothing granted, or to a waiter that stopped waiting (whose Abandon
// releases it), the waiter woken looks for itself.
func (gs *gates) look(ctx context.Context, pc *parkConn, key string) {
	var ids, owner string
	var fence uint64
	var left int64
	start := time.Now()
	if err := pc.conn.QueryRowContext(ctx, gs.sql.grantRead, key).Scan(&ids, &owner, &fence, &left); err != nil {
		return // none (ErrNoRows), or the waiter's look finds it
	}
	id := strings.TrimSpace(ids)
	r := gs.local.request(key, id)
	if r == nil || r.Owner != owner || strings.Contains(id, " ") || gs.handsOver(key, id) {
		return
	}
	g := handoff{fence: fence, start: start.Add(time.Duration(left)*time.Millisecond - r.TTL)}
	if gs.local.handed.grant(id, g, gs.hub.Waiting) {
		gs.hub.Notify(id)
	}
}

// handing records that a release here is handing key to the waiter id
// (handOff), until the returned func is called.
func (gs *gates) handing(key, id string) (done func()) {
	if gs == nil {
		return func() {}
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.handed == nil {
		gs.handed = map[string]string{}
	}
	gs.handed[key] = id
	return func() {
		gs.mu.Lock()
		defer gs.mu.Unlock()
		delete(gs.handed, key)
	}
}

// handsOver reports whether a release here is handing key to id.
func (gs *gates) handsOver(key, id string) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.handed[key] == id
}
