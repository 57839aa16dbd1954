package sql

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// myHandoff opens a MySQL Locker and its driver for a hand-off test.
func myHandoff(t *testing.T) (locker.Locker, *sqlDriver) { return handoffOn(t, "LOCKER_TEST_MYSQL") }

// On MySQL a release of an Exclusive hold hands the key to this process's
// first waiter, the queue's first: each writer in turn takes its grant
// with no statement of its own, with a fence above the last, and its place
// in the queue is gone with it.
func TestMySQLHandsOff(t *testing.T) {
	t.Parallel()
	l, d := myHandoff(t)
	ctx := t.Context()
	key := "handoff-" + rand.Text()
	holder, err := l.Lock(ctx, key, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lease locker.Lease
		err   error
	}
	// A writer's place is written before it waits here, and the first
	// attempts again once it does: a release before that finds no waiter
	// to hand the key to, or one whose own attempt takes the key (seen
	// under a loaded run). Each writer waits here before the next comes,
	// the first once its two attempts are done.
	var looked atomic.Int64
	acquire := d.acquireOnce
	d.acquireOnce = func(ctx context.Context, d *sqlDriver, r *driver.Request) (driver.Grant, error) {
		defer looked.Add(1)
		return acquire(ctx, d, r)
	}
	const writers = 3
	got := make([]chan result, writers)
	for i := range got {
		got[i] = make(chan result, 1)
		go func() {
			lease, err := l.Lock(ctx, key, locker.WithTTL(time.Minute))
			got[i] <- result{lease, err}
		}()
		waitFor(t, "a writer waiting", func() bool {
			return queued(t, d, key) == i+1 && d.local.count(key) == i+1 && (i > 0 || looked.Load() >= 2)
		})
	}
	before, last := d.handoffs.count(), holder.Fence()
	for i := range writers {
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-got[i] // in queue order: the next one is still waiting
		if r.err != nil {
			t.Fatalf("writer %d: %v", i, r.err)
		}
		if r.lease.Fence() <= last {
			t.Fatalf("writer %d's fence %d, not above %d", i, r.lease.Fence(), last)
		}
		if n := d.handoffs.count() - before; n != uint64(i+1) {
			t.Fatalf("%d of the first %d grants were hand-offs", n, i+1)
		}
		if n := queued(t, d, key); n != writers-1-i {
			t.Fatalf("%d places left after writer %d's grant, want %d", n, i, writers-1-i)
		}
		holder, last = r.lease, r.lease.Fence()
	}
	if err := holder.Refresh(ctx); err != nil {
		t.Fatalf("the last hand-off's lease: %v", err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.(locker.Admin).Status(ctx, key); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("after the last release: %v, want the key free", err)
	}
}

// A waiter handed the key while it kept its place (a waiter behind
// another of this process's keeps it with one statement, and here that
// lands after the release deleted it, putting the waiter back in the
// queue) takes its grant with its next attempt, and leaves no place
// behind to hold up the waiters after it.
func TestMySQLHandOffWhileKeepingPlace(t *testing.T) {
	t.Parallel()
	l, d := myHandoff(t)
	ctx := t.Context()
	key := "handoff-keep-" + rand.Text()
	holder, err := l.Lock(ctx, key, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	r, _, stop, _ := waiting(t, d, key)
	defer stop()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := queued(t, d, key); n != 0 {
		t.Fatalf("%d places left by the hand-off", n)
	}
	if g, err := d.placeOnce(ctx, d, r); err != nil || g.Hold != nil { // the keep, landing late
		t.Fatalf("keeping the place: %v (%v), want a place", g.Hold, err)
	}
	if n := queued(t, d, key); n != 1 {
		t.Fatalf("%d places after the late keep, want it back in the queue", n)
	}
	g, err := d.Acquire(ctx, r)
	if err != nil || g.Hold == nil || g.Fence <= holder.Fence() {
		t.Fatalf("the attempt after the hand-off: %v fence %d (%v), want the grant", g.Hold, g.Fence, err)
	}
	if n := queued(t, d, key); n != 0 {
		t.Fatalf("%d places left behind the grant", n)
	}
	if err := g.Hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Where the hand-off's procedure is not to be had (here: dropped after
// Open made it, as for a user who may not run it), releases delete and the
// waiter looks, as before; the fast lane's procedures stay in use.
func TestMySQLHandOffMissing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	table := "handoff_missing_" + strings.ToLower(rand.Text()[:8])
	u := testenv.URL(t, "LOCKER_TEST_MYSQL")
	q := u.Query()
	q.Set("table", table)
	u.RawQuery = q.Encode()
	l, err := Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	d := driverOf(l)
	if _, err := d.db.ExecContext(ctx, "DROP PROCEDURE `"+table+myXReleaseName+"`"); err != nil {
		t.Fatal(err)
	}
	key := "handoff-missing-" + rand.Text()
	holder, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lease, err := l.Lock(ctx, key)
		if err == nil {
			if lease.Fence() <= holder.Fence() {
				err = errors.New("fence not above the holder's")
			} else {
				err = lease.Unlock(ctx)
			}
		}
		got <- err
	}()
	waitFor(t, "the waiter queued", func() bool { return queued(t, d, key) == 1 })
	before := d.handoffs.count()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	if n := d.handoffs.count() - before; n != 0 {
		t.Fatalf("%d hand-offs with no procedure", n)
	}
	if !d.handOffOff.Load() || d.laneOff.Load() {
		t.Fatalf("hand-off off %v, fast lane off %v: want the hand-off alone off", d.handOffOff.Load(), d.laneOff.Load())
	}
}

// The release's procedure commits a hand-off before the release hands it
// over here, and the waiter's attempt in between finds the key under its
// ID and takes it: that grant is the waiter's lease, not an orphan for the
// hand-over to release (which let a lease's row go under it, and Unlock
// say ErrNotHeld, in a full run's migration test).
func TestMySQLHandOffFoundFirst(t *testing.T) {
	t.Parallel()
	_, d := myHandoff(t)
	ctx := t.Context()
	key := "handoff-found-" + rand.Text()
	h, held := myHolder(t, d, key)
	r, _, stop, start := waiting(t, d, key)
	defer stop()
	fence := xreleaseTo(t, d, h, held, r, r)
	g, err := d.Acquire(ctx, r)
	if err != nil || g.Hold == nil || g.Fence != fence {
		t.Fatalf("the waiter's attempt: %v fence %d (%v), want the hand-off's grant, fence %d", g.Hold, g.Fence, err, fence)
	}
	stop() // its call has ended, granted
	if orphans := d.give([]handed{{id: r.ID, owner: r.Owner, fence: fence}}, start); len(orphans) != 0 {
		t.Fatal("the hand-off the waiter took is handed over as an orphan, to be released under its lease")
	}
	if err := g.Hold.Release(ctx); err != nil {
		t.Fatalf("the waiter's release: %v", err)
	}
	// Released before its hand-over came (or none will): no mark is kept.
	d.handoffs.foundOwn(r.ID)
	_ = (&hold{d: d, key: key, owner: r.Owner, id: r.ID}).Release(ctx)
	if d.handoffs.found[r.ID] {
		t.Error("a released hold's mark is kept: marks would pile up")
	}
}

// count is how many calls wait for key here.
func (q *localQueue) count(key string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.keys[key])
}

// myHolder takes key on d for a request of its own, with a minute's TTL:
// the holder that a test's release lets go. It returns the request and
// its fence.
func myHolder(t *testing.T, d *sqlDriver, key string) (*driver.Request, uint64) {
	t.Helper()
	h := &driver.Request{Key: key, Owner: rand.Text(), ID: rand.Text(), TTL: time.Minute}
	g, err := d.Acquire(t.Context(), h)
	if err != nil || g.Hold == nil {
		t.Fatalf("holder: %v (%v)", g.Hold, err)
	}
	return h, g.Fence
}

// xreleaseTo runs the release procedure on d for h's hold of fence, as
// handOff does, naming next as this process's first waiter (nil: none),
// and fails t unless it granted the key to want. It returns the grant's
// fence.
func xreleaseTo(t *testing.T, d *sqlDriver, h *driver.Request, fence uint64, next, want *driver.Request) uint64 {
	t.Helper()
	nextID, nextOwner, nextTTL := "", "", int64(0)
	if next != nil {
		nextID, nextOwner, nextTTL = next.ID, next.Owner, next.TTL.Milliseconds()
	}
	var done int
	var granted uint64
	var to string
	if err := row(d.db.QueryRowContext(t.Context(), "CALL `"+d.cfg.table+myXReleaseName+"`(?, ?, ?, ?, ?, ?, ?)",
		h.Key, h.Owner, fence, h.ID, nextID, nextOwner, nextTTL), &done, &granted, &to); err != nil || done != 1 || granted == 0 || to != want.ID {
		t.Fatalf("the release's procedure: done %d fence %d to %q (%v), want the key granted to the waiter", done, granted, to, err)
	}
	return granted
}
