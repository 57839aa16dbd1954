package sql

import (
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// limitURLs are the databases of dialects(t), by the same names: a test
// opens several Lockers on each (a fresh SQLite file per test).
func limitURLs(t *testing.T) map[string]string {
	return map[string]string{
		"postgres":                testenv.URL(t, "LOCKER_TEST_POSTGRES").String(),
		"sqlite":                  "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "limit.db")),
		"mysql":                   testenv.URL(t, "LOCKER_TEST_MYSQL").String(),
		"mysql-single-statements": testenv.URL(t, "LOCKER_TEST_MYSQL").String() + "?multiStatements=false",
	}
}

// openLimit opens a Locker on raw, closed when t ends.
func openLimit(t *testing.T, raw string) locker.Locker {
	t.Helper()
	l, err := Open(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// places counts key's places in the queue of l's table.
func places(t *testing.T, l locker.Locker, key string) int {
	t.Helper()
	d := driverOf(l)
	q := `SELECT COUNT(*) FROM ` + d.cfg.table + `_queue WHERE "key" = $1`
	if strings.Contains(d.mq.lock.q, "ON DUPLICATE KEY") { // MySQL
		q = "SELECT COUNT(*) FROM " + d.cfg.table + "_queue WHERE `key` = ?"
	}
	var n int
	if err := d.db.QueryRowContext(t.Context(), q, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// lockLater starts a Lock of key, Limit(n), and returns its lease (nil
// on failure, reported) once it has one.
func lockLater(t *testing.T, ctx context.Context, l locker.Locker, key string, n int) <-chan locker.Lease {
	got := make(chan locker.Lease, 1)
	go func() {
		lease, err := l.Lock(ctx, key, locker.Limit(n), locker.WithTTL(wakeTTL))
		if err != nil {
			t.Errorf("a waiter of a Limit(%d): %v (not woken in its turn?)", n, err)
		}
		got <- lease
	}()
	return got
}

// A full Limit(2) with two waiters (another Locker's, as another
// process's): each release admits the first waiter, woken well before its
// fallback retry (TTL/3, 10 s, beyond the waiters' 5 s), in arrival order;
// Status shows the key Limited with its holders; once the last holder has
// left, the key's n is forgotten: a Limit(3), then an exclusive lock, may
// take it.
func TestLimitWaitersInTurn(t *testing.T) {
	for name, raw := range limitURLs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testLimitWaitersInTurn(t, openLimit(t, raw), openLimit(t, raw))
		})
	}
}

func testLimitWaitersInTurn(t *testing.T, holders, waiters locker.Locker) {
	ctx := t.Context()
	key := "limit-turn-" + rand.Text()
	a, err := holders.TryLock(ctx, key, locker.Limit(2), locker.WithTTL(wakeTTL))
	if err != nil {
		t.Fatal(err)
	}
	b, err := holders.TryLock(ctx, key, locker.Limit(2), locker.WithTTL(wakeTTL))
	if err != nil {
		t.Fatal(err)
	}
	checkLimitStatus(t, holders, key, 2, a.Fence(), b.Fence())
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	first := lockLater(t, wctx, waiters, key, 2)
	waitFor(t, "the first waiter queues", func() bool { return places(t, holders, key) == 1 })
	second := lockLater(t, wctx, waiters, key, 2)
	waitFor(t, "the second waiter queues", func() bool { return places(t, holders, key) == 2 })
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	c := <-first
	if c == nil {
		return
	}
	select {
	case d := <-second:
		t.Fatalf("the second waiter holds too (%v): a third holder of a Limit(2)", d != nil)
	case <-time.After(300 * time.Millisecond):
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	d := <-second
	if d == nil {
		return
	}
	if c.Fence() <= b.Fence() || d.Fence() <= c.Fence() {
		t.Errorf("fences %d, %d, then %d and %d: not rising", a.Fence(), b.Fence(), c.Fence(), d.Fence())
	}
	checkLimitStatus(t, holders, key, 2, c.Fence(), d.Fence())
	for _, l := range []locker.Lease{c, d} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	checkLimitForgotten(t, holders, key)
}

// checkLimitStatus: Status and List say key is a Limit(n) held at fences.
func checkLimitStatus(t *testing.T, l locker.Locker, key string, n int, fences ...uint64) {
	t.Helper()
	info, err := l.(locker.Admin).Status(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, h := range info.Holders {
		got = append(got, h.Fence)
	}
	if info.Mode != locker.ModeLimited || info.Limit != n || !slices.Equal(got, fences) || info.Fence != fences[0] {
		t.Errorf("Status = mode %v, Limit %d, holders at %v (fence %d); want a Limit(%d) held at %v", info.Mode, info.Limit, got, info.Fence, n, fences)
	}
	list, err := l.(locker.Admin).List(t.Context(), key)
	if err != nil || len(list) != 1 || list[0].Mode != locker.ModeLimited || list[0].Limit != n || len(list[0].Holders) != len(fences) {
		t.Errorf("List = %+v, %v; want the Limit(%d) with %d holders", list, err, n, len(fences))
	}
}

// checkLimitForgotten: key, free, takes a Limit(3) of three owners, then
// an exclusive lock.
func checkLimitForgotten(t *testing.T, l locker.Locker, key string) {
	t.Helper()
	ctx := t.Context()
	if _, err := l.(locker.Admin).Status(ctx, key); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Status once every holder left = %v; want ErrNotHeld", err)
	}
	var three []locker.Lease
	for range 3 {
		lease, err := l.TryLock(ctx, key, locker.Limit(3))
		if err != nil {
			t.Fatalf("a Limit(3) once the Limit(2)'s holders left: %v", err)
		}
		three = append(three, lease)
	}
	for _, lease := range three {
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	x, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("an exclusive lock once the Limit(3)'s holders left: %v", err)
	}
	if err := x.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Mismatches are refused at once (not retried as failures), as
// ErrModeMismatch, for any owner, leaving no place in the queue: an
// exclusive Lock or TryLock, a shared lock or another Limit on a Limited
// key; a Limit on a key held exclusively or shared.
func TestLimitMismatch(t *testing.T) {
	for name, raw := range limitURLs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l, other := openLimit(t, raw), openLimit(t, raw)
			testLimitMismatch(t, l, other)
		})
	}
}

func testLimitMismatch(t *testing.T, l, other locker.Locker) {
	ctx := t.Context()
	key := "limit-mismatch-" + rand.Text()
	refuse := func(what string, lock func(context.Context, string, ...locker.Option) (locker.Lease, error), key string, opts ...locker.Option) {
		t.Helper()
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		start := time.Now()
		lease, err := lock(lctx, key, opts...)
		if !errors.Is(err, locker.ErrModeMismatch) || errors.Is(err, locker.ErrUnavailable) {
			t.Errorf("%s: %v; want ErrModeMismatch", what, err)
			if lease != nil {
				_ = lease.Unlock(ctx)
			}
		}
		// Not retried as if transient (that took 5 s): at once, but four
		// dialects refuse in parallel on a loaded machine.
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s: refused after %v; want at once", what, took)
		}
		if n := places(t, l, key); n != 0 {
			t.Errorf("%s: %d places left in the queue; want none", what, n)
		}
	}
	held, err := l.TryLock(ctx, key, locker.Limit(2))
	if err != nil {
		t.Fatal(err)
	}
	refuse("an exclusive TryLock on a Limit(2)", other.TryLock, key)
	refuse("an exclusive Lock on a Limit(2)", other.Lock, key)
	refuse("a shared TryLock on a Limit(2)", other.TryLock, key, locker.Shared())
	refuse("a shared Lock on a Limit(2)", other.Lock, key, locker.Shared())
	refuse("a Limit(3) on a Limit(2)", other.Lock, key, locker.Limit(3))
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for what, opts := range map[string][]locker.Option{"exclusive": nil, "shared": {locker.Shared()}} {
		held, err := l.TryLock(ctx, key, opts...)
		if err != nil {
			t.Fatal(err)
		}
		refuse("a Limit(2) TryLock on an "+what+" lock", other.TryLock, key, locker.Limit(2))
		refuse("a Limit(2) Lock on an "+what+" lock", other.Lock, key, locker.Limit(2))
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A table made before limits (no lim column in the holders and queue
// tables) still opens: the migration adds the columns, and the key takes
// a Limit(2).
func TestLimitMigratesOldTables(t *testing.T) {
	for name, raw := range limitURLs(t) {
		t.Run(name, func(t *testing.T) {
			raw := raw + sep(raw) + "table=limit_migrate"
			l := openLimit(t, raw)
			d := driverOf(l)
			for _, table := range []string{"limit_migrate_hold", "limit_migrate_queue"} {
				if _, err := d.db.ExecContext(t.Context(), "ALTER TABLE "+table+" DROP COLUMN lim"); err != nil {
					t.Fatal(err)
				}
			}
			_ = l.Close()
			l = openLimit(t, raw)
			key := "limit-migrate-" + rand.Text()
			var leases []locker.Lease
			for range 2 {
				lease, err := l.TryLock(t.Context(), key, locker.Limit(2))
				if err != nil {
					t.Fatalf("a Limit(2) on a migrated table: %v", err)
				}
				leases = append(leases, lease)
			}
			checkLimitStatus(t, l, key, 2, leases[0].Fence(), leases[1].Fence())
			for _, lease := range leases {
				if err := lease.Unlock(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// sep is what joins a parameter to raw's query.
func sep(raw string) string {
	if strings.Contains(raw, "?") {
		return "&"
	}
	return "?"
}

// The modal rule for Limited requests, in Go: rule 2 for any owner, rule 3
// counting the Limited waiters before the request (not the other modes'),
// and the waiters a change admits.
func TestLimitRule(t *testing.T) {
	const l, x, s = driver.Limited, driver.Exclusive, driver.Shared
	lim := func(owner string, n int) holder { return holder{owner: owner, mode: l, lim: n, left: 1000} }
	wait := func(token string, m driver.Mode, n int) place {
		return place{token: token, mode: m, lim: n, seq: int64(len(token)), left: 1000}
	}
	req := func(owner string, m driver.Mode, n int) *driver.Request {
		return &driver.Request{Key: "k", Owner: owner, ID: owner, Mode: m, Limit: n}
	}
	st := &modeState{holders: []holder{lim("a", 2)}, queue: []place{wait("w", l, 2), wait("ww", x, 0), wait("www", l, 2)}}
	for _, c := range []struct {
		r        *driver.Request
		token    string
		ok       bool
		mismatch bool
	}{
		{req("b", l, 2), "", false, false},      // a holds, w waits before it: full
		{req("w", l, 2), "w", true, false},      // w's turn
		{req("www", l, 2), "www", false, false}, // a and w before it; ww is no Limited waiter
		{req("a", l, 2), "", true, false},       // re-entry: no second slot
		{req("b", l, 3), "", false, true},       // another n
		{req("b", x, 0), "", false, true},       // another mode, any owner
		{req("b", s, 0), "", false, true},
	} {
		v, err := st.decide(c.r, c.token)
		if v.ok != c.ok || errors.Is(err, locker.ErrModeMismatch) != c.mismatch {
			t.Errorf("%s, %v, Limit(%d): granted %v, %v; want granted %v, mismatch %v", c.r.Owner, c.r.Mode, c.r.Limit, v.ok, err, c.ok, c.mismatch)
		}
	}
	for _, c := range []struct {
		holders []holder
		queue   []place
		want    []string
	}{
		{[]holder{lim("a", 3)}, []place{wait("w", l, 3), wait("ww", l, 3), wait("www", l, 3)}, []string{"w", "ww"}},
		{nil, []place{wait("w", l, 2), wait("ww", l, 2), wait("www", l, 2)}, []string{"w", "ww"}},
		{nil, []place{wait("w", l, 3), wait("ww", x, 0), wait("www", l, 3)}, []string{"w", "www"}},
		{[]holder{{owner: "a", mode: s, left: 1000}}, []place{wait("w", l, 2)}, nil},
		{[]holder{{owner: "a", mode: s, left: 1000}}, []place{wait("w", s, 0), wait("ww", x, 0), wait("www", s, 0)}, []string{"w"}},
	} {
		st := &modeState{holders: c.holders, queue: c.queue}
		if st.admit(""); !slices.Equal(st.wake, c.want) {
			t.Errorf("holders %v, queue %v: wakes %v; want %v", c.holders, c.queue, st.wake, c.want)
		}
	}
}

// This process's Limited waiters of one Limit n form a run of at most n:
// a release wakes them all, and each may look.
func TestLocalQueueLimitedRun(t *testing.T) {
	q := newLocalQueue()
	for _, id := range []string{"a", "b", "c"} {
		q.join(&driver.Request{Key: "k", ID: id, Mode: driver.Limited, Limit: 2})
	}
	q.join(&driver.Request{Key: "k", ID: "d", Mode: driver.Limited, Limit: 3})
	if q.behindAs("k", "a", driver.Limited, 2) || q.behindAs("k", "b", driver.Limited, 2) || !q.behindAs("k", "c", driver.Limited, 2) ||
		!q.behindAs("k", "new", driver.Limited, 2) || !q.behindAs("k", "d", driver.Limited, 3) {
		t.Error("behind: the first two Limit(2) waiters look, the others wait")
	}
	q.leave("k", "a")
	q.leave("k", "b")
	if q.behindAs("k", "c", driver.Limited, 2) || !q.behindAs("k", "d", driver.Limited, 3) {
		t.Error("a Limit(3) waiter is no run with a Limit(2) one")
	}
}

// Postgres's hand-off (locker_locks_handoff_v5, run here by an Exclusive
// release) grants the Limited waiters it admits, the first n of them (n:
// their Limit, no Limited holder being left), each told its fence by its
// notification, and leaves the others' places: the third waiter of a
// Limit(2) is neither granted nor woken.
func TestLimitHandoffGrants(t *testing.T) {
	l := openLimit(t, testenv.URL(t, "LOCKER_TEST_POSTGRES").String())
	d, ctx := driverOf(l), t.Context()
	key := "limit-handoff-" + rand.Text()
	x, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	var woken []<-chan struct{}
	for i := range 3 { // a Limit(2)'s three waiters, as if placed behind the exclusive holder
		token := key + "-" + string(rune('a'+i))
		wake, stop, err := d.hub.Subscribe(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		tokens, woken = append(tokens, token), append(woken, wake)
		if _, err := d.db.ExecContext(ctx, `INSERT INTO locker_locks_queue ("key", token, mode, expires_at, owner, ttl, lim)
VALUES ($1, $2, 4, clock_timestamp() + interval '30 seconds', $2, 30000, 2)`, key, token); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = d.db.Exec(`DELETE FROM locker_locks_queue WHERE "key" = $1`, key)
		_, _ = d.db.Exec(`DELETE FROM locker_locks_hold WHERE "key" = $1`, key)
		_, _ = d.db.Exec(`DELETE FROM locker_locks WHERE "key" = $1`, key)
	})
	if err := x.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	fences := map[uint64]bool{}
	for i, wake := range woken {
		wait := 2 * time.Second
		if i == 2 {
			wait = 300 * time.Millisecond
		}
		select {
		case <-wake:
			if i == 2 {
				t.Error("the third waiter of a Limit(2) was woken")
			}
		case <-time.After(wait):
			if i < 2 {
				t.Errorf("waiter %d of a Limit(2) not woken by the release", i+1)
			}
			continue
		}
		if g, ok := d.handoffs.take(tokens[i]); !ok || g.fence <= x.Fence() || fences[g.fence] {
			t.Errorf("waiter %d woken with grant %v (%v), want a fence of its own above %d", i+1, g.fence, ok, x.Fence())
		} else {
			fences[g.fence] = true
		}
	}
	var holders int
	if err := d.db.QueryRowContext(ctx, `SELECT count(*) FROM locker_locks_hold WHERE "key" = $1 AND mode = 4 AND lim = 2
AND owner IN ($2, $3)`, key, tokens[0], tokens[1]).Scan(&holders); err != nil {
		t.Fatal(err)
	}
	if n := places(t, l, key); holders != 2 || n != 1 {
		t.Errorf("after the release: %d holders, %d places; want the first two granted, the third's place kept", holders, n)
	}
}
