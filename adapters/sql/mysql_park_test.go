package sql

import (
	"context"
	"crypto/rand"
	dbsql "database/sql"
	"errors"
	"strconv"
	"testing"
	"time"

	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// A release wakes the process whose waiter comes first, and that one
// alone: a holds; b and then c wait, each in a process of its own with
// its gate parked; a's release interrupts b's park (a poll or the end of
// its sleep would not count as woken), and c's stays parked, with no
// attempt, until b's release interrupts it in turn.
func TestMySQLReleaseWakesTheFirstProcessAlone(t *testing.T) {
	ctx := t.Context()
	ls := parkingProcesses(t, 3)
	a, b, c := ls[0], ls[1], ls[2]
	db, dc := driverOf(b), driverOf(c)
	key := "park-" + rand.Text()
	held, err := a.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	gotB := lockAsync(ctx, t, b, key)
	waitFor(t, "b parks", func() bool { return db.gates.parked(t, key) })
	gotC := lockAsync(ctx, t, c, key)
	waitFor(t, "c parks", func() bool { return dc.gates.parked(t, key) })
	attemptsC := countAttempts(dc)

	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	leaseB := <-gotB
	if leaseB == nil {
		t.FailNow()
	}
	if n := db.gates.woken.Load(); n != 1 {
		t.Errorf("b's park was interrupted %d times, want 1", n)
	}
	if n, w := attemptsC.Load(), dc.gates.woken.Load(); n != 0 || w != 0 || !dc.gates.parked(t, key) {
		t.Errorf("c, second in the queue, was woken by a's release (%d attempts, %d wakes)", n, w)
	}
	if err := leaseB.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	leaseC := <-gotC
	if leaseC == nil {
		t.FailNow()
	}
	if n := dc.gates.woken.Load(); n != 1 {
		t.Errorf("c's park was interrupted %d times, want 1", n)
	}
	if err := leaseC.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A release whose KILL finds the parked process gone (it crashed: its
// connections closed) still releases, and the waiter behind the crashed
// one gets the key once the crashed one's place lapses.
func TestMySQLReleaseFindsTheParkedProcessGone(t *testing.T) {
	ctx := t.Context()
	ls := processes(t, 3)
	a, b, c := ls[0], ls[1], ls[2]
	key := "park-gone-" + rand.Text()
	held, err := a.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = b.Lock(ctx, key, locker.WithTTL(time.Second)) }() // b's place lapses a second after it crashes
	waitFor(t, "b parks", func() bool { return driverOf(b).gates.parked(t, key) })
	gotC := lockAsync(ctx, t, c, key)
	waitFor(t, "c parks", func() bool { return driverOf(c).gates.parked(t, key) })
	Crash(b)
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("Unlock with the first waiter's process gone: %v", err)
	}
	lease := <-gotC
	if lease == nil {
		t.FailNow()
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A gate parked with no waiter left gives its room up when another key
// needs it: with room for one gate (a pool of four: half of it, less the
// anchor's connection), a waiter of key 1
// parks and gives up, its gate staying parked; a waiter of key 2 then
// gets a parked gate of its own, and is woken by a release.
func TestMySQLIdleParkGivesItsRoomUp(t *testing.T) {
	ctx := t.Context()
	dsn, _, err := mysqlDSN(testenv.URL(t, "LOCKER_TEST_MYSQL"))
	if err != nil {
		t.Fatal(err)
	}
	gdb, err := gorm.Open(gormmysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := gdb.DB()
	sqlDB.SetMaxOpenConns(4)
	t.Cleanup(func() { _ = sqlDB.Close() })
	w, err := New(gdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	h, err := Open(ctx, testenv.URL(t, "LOCKER_TEST_MYSQL").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	gs := gatesOf(t, sqlDB)
	if gs.room() != 1 || !gs.parking.Load() {
		t.Fatalf("a pool of four has room for %d gates (parking %v), want 1", gs.room(), gs.parking.Load())
	}
	key1, key2 := "park-room-"+rand.Text(), "park-room-"+rand.Text()
	held1, err := h.Lock(ctx, key1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held1.Unlock(ctx) }()
	wctx, giveUp := context.WithCancel(ctx)
	gave := make(chan error, 1)
	go func() { _, err := w.Lock(wctx, key1); gave <- err }()
	waitFor(t, "the waiter of key 1 parks", func() bool { return gs.parked(t, key1) })
	giveUp()
	if err := <-gave; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter of key 1 gave up with %v", err)
	}
	if !gs.parked(t, key1) || gs.count() != 1 {
		t.Fatal("key 1's gate did not stay parked with no waiter")
	}

	held2, err := h.Lock(ctx, key2)
	if err != nil {
		t.Fatal(err)
	}
	got := lockAsync(ctx, t, w, key2)
	waitFor(t, "the waiter of key 2 parks", func() bool { return gs.parked(t, key2) })
	woken := gs.woken.Load()
	if err := held2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lease := <-got
	if lease == nil {
		t.FailNow()
	}
	if gs.woken.Load() != woken+1 {
		t.Error("the waiter of key 2 was not woken by the release")
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// parked reports whether key's gate waits in the server (for the anchor's
// name, as the process list shows it), not only on its way there.
func (gs *gates) parked(t *testing.T, key string) bool {
	gs.mu.Lock()
	g := gs.keys[key]
	var id int64
	if g != nil && g.waiting {
		id = g.conn
	}
	gs.mu.Unlock()
	if id == 0 {
		return false
	}
	var n int
	err := gs.db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND STATE = 'User lock'", id).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// processes opens n Lockers on the MySQL server, each on a pool of its
// own, as n processes would, closed when t ends.
func processes(t *testing.T, n int) []locker.Locker {
	raw := testenv.URL(t, "LOCKER_TEST_MYSQL").String()
	ls := make([]locker.Locker, n)
	for i := range ls {
		l, err := Open(t.Context(), raw)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		ls[i] = l
	}
	return ls
}

// parkingProcesses is processes(t, n), failing t unless their gates park.
func parkingProcesses(t *testing.T, n int) []locker.Locker {
	ls := processes(t, n)
	for _, l := range ls {
		if !driverOf(l).gates.parking.Load() {
			t.Fatal("the gates do not park: the release procedure's definer is not this user")
		}
	}
	return ls
}

// gatesOf is the gates of this process's Lockers on db.
func gatesOf(t *testing.T, db *dbsql.DB) *gates {
	w, release, err := waiters.Get(t.Context(), listenerKey{db, "locker_locks"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	release()
	return w.gates
}

// A waiter that no release wakes through a park polls though its process
// has one parked: a Shared waiter (the modal path's places name no
// process) behind another process's Exclusive holder, in a process whose
// gate stays parked after its Exclusive waiter gave up.
func TestMySQLModalWaiterBesideAParkPolls(t *testing.T) {
	ctx := t.Context()
	ls := processes(t, 2)
	h, w := ls[0], ls[1]
	dw := driverOf(w)
	key := "park-modal-" + rand.Text()
	held, err := h.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	wctx, giveUp := context.WithCancel(ctx)
	gave := make(chan error, 1)
	go func() { _, err := w.Lock(wctx, key); gave <- err }()
	waitFor(t, "the Exclusive waiter parks", func() bool { return dw.gates.parked(t, key) })
	giveUp()
	<-gave
	got := make(chan error, 1)
	go func() { // the holder's release wakes it by its next poll, long before its fallback (a TTL/3: 5 s)
		sctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		defer cancel()
		lease, err := w.Lock(sctx, key, locker.Shared())
		if err == nil {
			err = lease.Unlock(ctx)
		}
		got <- err
	}()
	waitFor(t, "the Shared waiter queues", func() bool {
		var n int
		err := dw.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM locker_locks_queue WHERE `key` = ? AND mode <> 0", key).Scan(&n)
		return err == nil && n == 1
	})
	if !dw.gates.parked(t, key) {
		t.Fatal("the gate did not stay parked")
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// A waiter whose process's gate is parked already (its waiter gave up)
// marks the holder's row as it takes its place: the holder, which did not
// wait and found the row unmarked when it claimed it, then releases
// through the procedure that interrupts the park, not with a plain DELETE.
func TestMySQLWaiterBehindAParkMarksTheRow(t *testing.T) {
	ctx := t.Context()
	ls := processes(t, 2)
	p, b := ls[0], ls[1]
	db := driverOf(b)
	key := "park-mark-" + rand.Text()
	held, err := p.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	wctx, giveUp := context.WithCancel(ctx)
	gave := make(chan error, 1)
	go func() { _, err := b.Lock(wctx, key); gave <- err }()
	waitFor(t, "b's first waiter parks", func() bool { return db.gates.parked(t, key) })
	giveUp()
	<-gave
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if held, err = p.Lock(ctx, key); err != nil { // a row of a holder that did not wait, unmarked
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 4*time.Second) // its fallback: 5 s
		defer cancel()
		lease, err := b.Lock(sctx, key)
		if err == nil {
			err = lease.Unlock(ctx)
		}
		got <- err
	}()
	waitFor(t, "b's second waiter queues", func() bool {
		var n int
		err := db.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM locker_locks_queue WHERE `key` = ?", key).Scan(&n)
		return err == nil && n == 1
	})
	if !db.gates.parked(t, key) {
		t.Fatal("b's gate did not stay parked")
	}
	woken := db.gates.woken.Load()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if db.gates.woken.Load() != woken+1 {
		t.Error("b's park was not interrupted by the release")
	}
}

// A release interrupts a park's connection, and no other client's: b
// parks (its connection holding its named lock), and its park row is made
// to name another connection, as a restarted server may give b's old id
// to another client. That one's query is left to finish unless it runs a
// park of a version before the named locks (the process list shows it
// tagged); b gets the key either way, at the latest when its park's sleep
// ends.
func TestMySQLReleaseInterruptsOnlyAPark(t *testing.T) {
	for _, tc := range []struct {
		name, query string
		killed      bool
	}{
		{"another client", "SELECT SLEEP(2)", false},
		{"an older park", "SELECT /* locker park */ SLEEP(10)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			ls := processes(t, 2)
			a, b := ls[0], ls[1]
			db := driverOf(b)
			key := "park-only-" + rand.Text()
			held, err := a.Lock(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			got := lockAsync(ctx, t, b, key, locker.WithTTL(2*time.Second)) // its park sleeps 2 s at most
			waitFor(t, "b parks", func() bool { return db.gates.parked(t, key) })
			db.gates.mu.Lock()
			park := db.gates.keys[key].conn
			db.gates.mu.Unlock()
			var holder int64
			if err := db.db.QueryRowContext(ctx, "SELECT COALESCE(IS_USED_LOCK(CONCAT(?, ?)), 0)", parkLock, park).Scan(&holder); err != nil || holder != park {
				t.Fatalf("the park's connection %d does not hold its named lock (held by %d, %v)", park, holder, err)
			}

			other, err := db.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer closeBad(other)
			var id int64
			if err := other.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				t.Fatal(err)
			}
			slept := make(chan error, 1)
			go func() {
				var n int64
				err := other.QueryRowContext(ctx, tc.query).Scan(&n)
				if err == nil && n == 1 { // MySQL's SLEEP answers 1 when interrupted; MariaDB fails
					err = errors.New("interrupted")
				}
				slept <- err
			}()
			waitFor(t, "the other connection sleeps", func() bool {
				var n int
				err := db.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND STATE = 'User sleep'", id).Scan(&n)
				return err == nil && n == 1
			})
			if _, err := db.db.ExecContext(ctx, "UPDATE locker_locks_park SET conn = ? WHERE `key` = ? AND proc = ?", id, key, db.gates.proc); err != nil {
				t.Fatal(err)
			}

			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-slept; (err != nil) != tc.killed {
				t.Errorf("the other connection's query: %v, want interrupted %v", err, tc.killed)
			}
			lease := <-got
			if lease == nil {
				t.FailNow()
			}
			if err := lease.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A park row goes with the release that wakes it, or else with its gate:
// a process that waits for many keys, one after another, each handed to
// it by a release in another process (the first 8) or free once the
// holder's lease lapsed (the last 2: no release wakes the park, which
// sleeps out its second, its waiter gone), keeps no row per key in the
// park table while it lives.
func TestMySQLParkRowsGoWithTheirWakes(t *testing.T) {
	ctx := t.Context()
	ls := processes(t, 2)
	a, b := ls[0], ls[1]
	db := driverOf(b)
	prefix := "park-rows-" + rand.Text() + "/"
	for i := range 10 {
		key, lapses := prefix+strconv.Itoa(i), i >= 8
		held, err := a.Lock(ctx, key, locker.WithTTL(time.Second), locker.WithKeepAlive(!lapses))
		if err != nil {
			t.Fatal(err)
		}
		got := lockAsync(ctx, t, b, key, locker.WithTTL(time.Second)) // its park sleeps a second at most
		waitFor(t, "b parks", func() bool { return db.gates.parked(t, key) })
		if !lapses {
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		lease := <-got
		if lease == nil {
			t.FailNow()
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "b's gates end", func() bool {
		db.gates.mu.Lock()
		defer db.gates.mu.Unlock()
		return len(db.gates.keys) == 0
	})
	// A gate that ends takes its row just after (runParked's unpark,
	// outside the gates' lock): wait for that, not for the instant after.
	waitFor(t, "b's park rows for the 10 keys go, their gates ended", func() bool {
		var n int
		if err := db.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM locker_locks_park WHERE proc = ? AND LEFT(`key`, LENGTH(?)) = ?", db.gates.proc, prefix, prefix).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}

// A park whose row a release took before its sleep began (the release's
// KILL, coming between the park's statements, interrupted none) does not
// sleep: the statement that sleeps asks for its row. Here the key is
// held, so without that it would sleep its hour.
func TestMySQLParkWhoseRowWentDoesNotSleep(t *testing.T) {
	ctx := t.Context()
	ls := parkingProcesses(t, 2)
	gs := driverOf(ls[1]).gates
	key := "park-row-gone-" + rand.Text()
	held, err := ls[0].Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Unlock(ctx) }()
	pc, err := gs.take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer gs.put(pc, true)
	if _, err := pc.conn.ExecContext(ctx, gs.sql.park, key, gs.proc); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.conn.ExecContext(ctx, gs.sql.unpark, key, gs.proc); err != nil { // the release's take
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var slept dbsql.NullInt64
	err = pc.conn.QueryRowContext(sctx, gs.sql.sleep, gs.sleepArgs(key, 3600)...).Scan(&slept)
	if err != nil || slept.Int64 != 0 {
		t.Fatalf("a park whose row a release took slept (%v, %v), where no release is left to interrupt it", slept.Int64, err)
	}
}
