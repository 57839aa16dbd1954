package sql

import (
	"context"
	"crypto/rand"
	dbsql "database/sql"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// A waiter in one process is woken by a release in another, with no poll
// between, where the releases cannot interrupt parks (watching names):
// three Lockers with pools of their own stand for three processes. a holds without having waited, so b, its waiter, finds the
// key's named lock free, keeps it and polls (as before gates); once b has
// the key, c watches the name b keeps, and makes no attempt until b's
// release hands it over.
func TestMySQLWakesWaitersOfOtherProcesses(t *testing.T) {
	raw := testenv.URL(t, "LOCKER_TEST_MYSQL").String()
	ctx := t.Context()
	var ls [3]locker.Locker
	for i := range ls {
		l, err := Open(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		ls[i] = l
	}
	a, b, c := ls[0], ls[1], ls[2]
	for _, l := range ls {
		namesOnly(l)
	}
	dc := driverOf(c)
	attempts := countAttempts(dc)
	key := "gate-" + rand.Text()

	held, err := a.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	gotB := lockAsync(ctx, t, b, key)
	waitFor(t, "b watches the key", func() bool { return driverOf(b).gates.holds(key) })
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	held = <-gotB
	if held == nil {
		t.FailNow()
	}

	gotC := lockAsync(ctx, t, c, key)
	waitFor(t, "c watches the name b keeps", func() bool { return dc.gates.watching(key) })
	before := attempts.Load()
	hold := 500 * time.Millisecond // a poll every 50 ms at most would make 10 attempts
	time.Sleep(hold)
	during := attempts.Load() - before
	released := time.Now()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	leaseC := <-gotC
	if leaseC == nil {
		t.FailNow()
	}
	t.Logf("c: %d attempts while b held the key %v; got it %v after b's release", during, hold, time.Since(released))
	if during > 1 {
		t.Errorf("c made %d attempts while b held the key for %v: it polled", during, hold)
	}
	if err := leaseC.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the gates end with their waiters", func() bool {
		return driverOf(b).gates.count() == 0 && dc.gates.count() == 0
	})
}

// lockAsync locks key on l in the background, with a TTL of 10 s unless
// opts say otherwise; its lease arrives on the channel (nil if Lock
// failed, as t is told).
func lockAsync(ctx context.Context, t *testing.T, l locker.Locker, key string, opts ...locker.Option) <-chan locker.Lease {
	got := make(chan locker.Lease, 1)
	go func() {
		lease, err := l.Lock(ctx, key, append([]locker.Option{locker.WithTTL(10 * time.Second)}, opts...)...)
		if err != nil {
			t.Errorf("Lock %q: %v", key, err)
		}
		got <- lease
	}()
	return got
}

// countAttempts counts d's acquire attempts from now on.
func countAttempts(d *sqlDriver) *atomic.Int64 {
	n := new(atomic.Int64)
	acquire := d.acquireOnce
	d.acquireOnce = func(ctx context.Context, d *sqlDriver, r *driver.Request) (driver.Grant, error) {
		n.Add(1)
		return acquire(ctx, d, r)
	}
	return n
}

// namesOnly makes l's gates watch names, as where a release may not
// interrupt their parks. Before l waits.
func namesOnly(l locker.Locker) {
	gs := driverOf(l).gates
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.parking.Store(false)
}

// holds reports whether key's gate holds the name.
func (gs *gates) holds(key string) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.keys[key]
	return g != nil && g.holding
}

// watching reports whether a gate of key waits for the name.
func (gs *gates) watching(key string) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.keys[key]
	return g != nil && g.waiting
}

// count is the number of gates.
func (gs *gates) count() int {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return len(gs.keys)
}

// waitFor polls cond until it holds, for at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

// A waiter for a key its own process holds does not poll: the release
// here wakes it.
func TestMySQLWaiterOfItsOwnProcessWaitsQuietly(t *testing.T) {
	ctx := t.Context()
	l, err := Open(ctx, testenv.URL(t, "LOCKER_TEST_MYSQL").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	d := driverOf(l)
	attempts := countAttempts(d)
	key := "quiet-" + rand.Text()
	held, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := lockAsync(ctx, t, l, key)
	waitFor(t, "the waiter queues", func() bool { return d.local.first(key) != "" && attempts.Load() >= 3 })
	before := attempts.Load()
	time.Sleep(300 * time.Millisecond) // a poll every 50 ms at most would make 6 attempts
	during := attempts.Load() - before
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if lease := <-got; lease != nil {
		_ = lease.Unlock(ctx)
	}
	if during > 0 || d.gates.count() != 0 {
		t.Errorf("the waiter made %d attempts while its own process held the key, with %d gates", during, d.gates.count())
	}
}

// A pool of one connection has no room for a gate, nor one of two while
// gates park (the gate and the anchor would take it all, and the woken
// waiter would find no connection to try with): the waiter polls, and
// still gets the key another process releases.
func TestMySQLSmallPoolHasNoGate(t *testing.T) {
	for _, pool := range []int{1, 2} {
		t.Run(strconv.Itoa(pool), func(t *testing.T) { smallPoolHasNoGate(t, pool) })
	}
}

func smallPoolHasNoGate(t *testing.T, pool int) {
	ctx := t.Context()
	u := testenv.URL(t, "LOCKER_TEST_MYSQL")
	dsn, _, err := mysqlDSN(u)
	if err != nil {
		t.Fatal(err)
	}
	var (
		ls [2]locker.Locker
		db *dbsql.DB
	)
	for i := range ls {
		gdb, err := gorm.Open(gormmysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
		if err != nil {
			t.Fatal(err)
		}
		sqlDB, _ := gdb.DB()
		sqlDB.SetMaxOpenConns(pool)
		t.Cleanup(func() { _ = sqlDB.Close() })
		db = sqlDB
		if ls[i], err = New(gdb); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ls[i].Close() })
	}
	key := "small-pool-" + rand.Text()
	held, err := ls[0].Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := lockAsync(wctx, t, ls[1], key)
	waitFor(t, "the waiter queues", func() bool {
		var n int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM locker_locks_queue WHERE `key` = ?", key).Scan(&n)
		return err == nil && n == 1
	})
	w, release, err := waiters.Get(ctx, listenerKey{db, "locker_locks"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	gates, n := w.gates.room(), w.gates.count()
	release()
	if gates != 0 || n != 0 {
		t.Errorf("a pool of %d connections may have %d gates, has %d", pool, gates, n)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lease := <-got
	if lease == nil {
		t.FailNow()
	}
	_ = lease.Unlock(ctx)
}
