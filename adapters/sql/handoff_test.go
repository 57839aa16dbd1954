package sql

import (
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// pgHandoff opens a Postgres Locker and its driver for a hand-off test.
func pgHandoff(t *testing.T) (locker.Locker, *sqlDriver) { return handoffOn(t, "LOCKER_TEST_POSTGRES") }

// handoffOn opens a Locker on the server that env names, and its driver,
// for a hand-off test.
func handoffOn(t *testing.T, env string) (locker.Locker, *sqlDriver) {
	t.Helper()
	l, err := Open(t.Context(), testenv.URL(t, env).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, driverOf(l)
}

func (h *handoffs) count() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.taken
}

// A release hands the key to the waiters it admits, in queue order: an
// Exclusive holder's release to the run of readers at the head (not to
// the writer behind them, nor the reader behind that writer), the last
// reader's to the writer, the writer's to the last reader. Each takes its
// grant with no statement of its own, with a fence above the last:
// Postgres's waiters learn it from the release's notification, SQLite's
// from the release's transaction in their process.
func TestHandsOff(t *testing.T) { onHandOffDialects(t, testHandsOff) }

// onHandOffDialects runs test on Postgres and on SQLite, in parallel: the
// two ways a release hands the key over.
func onHandOffDialects(t *testing.T, test func(t *testing.T, l locker.Locker, d *sqlDriver)) {
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		l, d := pgHandoff(t)
		test(t, l, d)
	})
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		l, d := sqliteHandoff(t)
		test(t, l, d)
	})
}

func testHandsOff(t *testing.T, l locker.Locker, d *sqlDriver) {
	ctx := t.Context()
	key := "handoff-" + rand.Text()
	first, err := l.Lock(ctx, key, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		name  string
		lease locker.Lease
		err   error
	}
	got := make(chan result, 5)
	order := []struct {
		name   string
		shared bool
	}{{"r1", true}, {"r2", true}, {"r3", true}, {"w", false}, {"r4", true}}
	for i, w := range order {
		opts := []locker.Option{locker.WithTTL(time.Minute)}
		if w.shared {
			opts = append(opts, locker.Shared())
		}
		go func() {
			lease, err := l.Lock(ctx, key, opts...)
			got <- result{w.name, lease, err}
		}()
		waitFor(t, w.name+" queued", func() bool { return queued(t, d, key) == i+1 })
	}
	before := d.handoffs.count()
	last := first.Fence()
	take := func(want ...string) []locker.Lease {
		t.Helper()
		var leases []locker.Lease
		for range want {
			r := <-got
			if r.err != nil {
				t.Fatalf("%s: %v", r.name, r.err)
			}
			if r.lease.Fence() <= last {
				t.Fatalf("%s's fence %d, not above %d", r.name, r.lease.Fence(), last)
			}
			leases = append(leases, r.lease)
		}
		for _, lease := range leases {
			last = max(last, lease.Fence())
		}
		select {
		case r := <-got:
			t.Fatalf("%s granted too, with %v", r.name, want)
		default:
		}
		return leases
	}
	unlock := func(leases ...locker.Lease) {
		t.Helper()
		for _, lease := range leases {
			if err := lease.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	unlock(first)
	readers := take("r1", "r2", "r3")
	if n := d.handoffs.count() - before; n != 3 {
		t.Fatalf("%d of the 3 readers' grants were hand-offs", n)
	}
	if queued(t, d, key) != 2 {
		t.Fatalf("%d places left, want the writer's and r4's", queued(t, d, key))
	}
	unlock(readers...)
	unlock(take("w")...)
	unlock(take("r4")...)
	if n := d.handoffs.count() - before; n != 5 {
		t.Fatalf("%d of the 5 grants were hand-offs", n)
	}
	if n := d.handoffs.direct.Load(); n != 0 {
		t.Fatalf("%d direct hand-offs, where a reader heads the queue or releases", n)
	}
}

// A waiter handed the key as it gives up (its place there, its call
// abandoned before it took the grant) does not keep the key: Abandon finds
// the hold under the call's ID and releases it. A waiter that did not take
// its hand-off (here: it stopped listening first) finds its grant by its
// next attempt.
func TestHandOffUntaken(t *testing.T) {
	onHandOffDialects(t, testHandOffUntaken)
	t.Run("MySQL", func(t *testing.T) {
		t.Parallel()
		l, d := myHandoff(t)
		testHandOffUntaken(t, l, d)
	})
}

func testHandOffUntaken(t *testing.T, l locker.Locker, d *sqlDriver) {
	ctx := t.Context()
	for _, abandon := range []bool{true, false} {
		key := "handoff-untaken-" + rand.Text()
		holder, err := l.Lock(ctx, key, locker.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		r, _, stop, start := waiting(t, d, key)
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		info, err := l.(locker.Admin).Status(ctx, key)
		if err != nil || len(info.Holders) != 1 || info.Holders[0].Owner != r.Owner {
			t.Fatalf("after the release: %+v (%v), want the waiter handed the key", info, err)
		}
		stop()
		if abandon {
			d.Abandon(ctx, r)
			if _, err := l.(locker.Admin).Status(ctx, key); !errors.Is(err, locker.ErrNotHeld) {
				t.Fatalf("after Abandon: %v, want the key free", err)
			}
			continue
		}
		g, err := d.Acquire(ctx, r)
		if err != nil || g.Hold == nil || g.Fence != info.Fence {
			t.Fatalf("the next attempt: %v fence %d (%v), want the handed fence %d", g.Hold, g.Fence, err, info.Fence)
		}
		if !g.Start.IsZero() && g.Start.Before(start) {
			t.Fatalf("validity from %v, before the call began", g.Start)
		}
		if err := g.Hold.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A hand-off heard is valid from the start of the waiter's last attempt
// that found it waiting, not from when it heard: the release came after
// that attempt, maybe long before the notification reached it.
func TestPostgresHandOffValidity(t *testing.T) {
	t.Parallel()
	l, d := pgHandoff(t)
	ctx := t.Context()
	key := "handoff-validity-" + rand.Text()
	holder, err := l.Lock(ctx, key, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	r, wake, stop, start := waiting(t, d, key)
	defer stop()
	attempted := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for heard := false; !heard; { // (the listener's start wakes every waiter too)
		select {
		case <-wake:
			d.handoffs.mu.Lock()
			_, heard = d.handoffs.m[r.ID]
			d.handoffs.mu.Unlock()
		case <-time.After(10 * time.Second):
			t.Fatal("no hand-off heard within 10s")
		}
	}
	before := d.handoffs.count()
	g, err := d.Acquire(ctx, r)
	if err != nil || g.Hold == nil || d.handoffs.count() != before+1 {
		t.Fatalf("after the wake: %v (%v), hand-offs taken %d, want the handed grant", g.Hold, err, d.handoffs.count()-before)
	}
	if g.Start.Before(start) || g.Start.After(attempted) {
		t.Fatalf("validity from %v, want the waiting attempt's start, in [%v, %v]", g.Start, start, attempted)
	}
	if err := g.Hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// waiting makes a Lock call's request for key wait on d by hand, as the
// portable layer does: subscribed, then an attempt that finds it waiting
// (a place in the queue), begun at start.
func waiting(t *testing.T, d *sqlDriver, key string) (r *driver.Request, wake <-chan struct{}, stop func(), start time.Time) {
	t.Helper()
	r = &driver.Request{Key: key, Owner: rand.Text(), ID: rand.Text(), TTL: time.Minute, Queue: true}
	wake, stop, err := d.Subscribe(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if g, err := d.Acquire(t.Context(), r); err != nil || g.Hold != nil {
		stop()
		t.Fatalf("a waiter's attempt: %v (%v), want a place", g.Hold, err)
	}
	return r, wake, stop, start
}

// queued is the number of key's places in the database's queue.
func queued(t *testing.T, d *sqlDriver, key string) int {
	t.Helper()
	var n int
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	q := `SELECT COUNT(*) FROM "` + d.cfg.table + `_queue" WHERE "key" = $1`
	if d.gates != nil { // MySQL
		q = "SELECT COUNT(*) FROM `" + d.cfg.table + "_queue` WHERE `key` = ?"
	}
	if err := d.db.QueryRowContext(ctx, q, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A grant handed to a waiter that stopped waiting between the hand-off's
// transaction and its commit (its call ended with nothing to abandon) is
// nobody's: handOver releases it.
func TestHandOffOrphanReleased(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	l, err := Open(ctx, "sqlite://"+filepath.ToSlash(filepath.Join(t.TempDir(), "orphan.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	d := driverOf(l)
	key := "handoff-orphan-" + rand.Text()
	r := &driver.Request{Key: key, Owner: rand.Text(), ID: rand.Text(), TTL: time.Minute}
	g, err := d.Acquire(ctx, r) // as a hand-off's transaction grants it
	if err != nil || g.Hold == nil {
		t.Fatalf("grant: %v (%v)", g.Hold, err)
	}
	d.handOver(ctx, key, []handed{{id: r.ID, owner: r.Owner, fence: g.Fence, mode: r.Mode}}, time.Now())
	waitFor(t, "the orphaned grant released", func() bool {
		_, err := l.(locker.Admin).Status(ctx, key)
		return errors.Is(err, locker.ErrNotHeld)
	})
	if _, ok := d.handoffs.take(r.ID); ok {
		t.Fatal("a hand-off kept for a waiter that is gone")
	}
}

// A Limited waiter handed a slot as it gives up (Postgres grants it in
// the release's hand-off) does not keep the slot: Abandon finds the hold
// under the call's ID and releases it, leaving the other holder alone.
func TestPostgresHandedSlotAbandoned(t *testing.T) {
	t.Parallel()
	l, d := pgHandoff(t)
	ctx := t.Context()
	key := "handoff-slot-" + rand.Text()
	var holders []locker.Lease
	for range 2 {
		lease, err := l.TryLock(ctx, key, locker.Limit(2), locker.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		holders = append(holders, lease)
	}
	r := &driver.Request{Key: key, Owner: rand.Text(), ID: rand.Text(), TTL: time.Minute, Queue: true, Mode: driver.Limited, Limit: 2}
	_, stop, err := d.Subscribe(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := d.Acquire(ctx, r); err != nil || g.Hold != nil {
		stop()
		t.Fatalf("a third of a Limit(2): %v (%v), want a place", g.Hold, err)
	}
	if err := holders[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	owners := func() []string {
		t.Helper()
		info, err := l.(locker.Admin).Status(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range info.Holders {
			out = append(out, h.Owner)
		}
		return out
	}
	if got := owners(); !slices.Contains(got, r.Owner) {
		t.Fatalf("after the release the holders are %q; want the waiter handed the slot", got)
	}
	stop()
	d.Abandon(ctx, r)
	if got := owners(); len(got) != 1 || slices.Contains(got, r.Owner) {
		t.Fatalf("after Abandon the holders are %q; want the other holder alone", got)
	}
	if err := holders[1].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
