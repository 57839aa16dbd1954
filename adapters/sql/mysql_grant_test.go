package sql

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// A release in one process grants the key to the first waiter, parked in
// another: that process's gate reads the grant and hands it over, and
// the waiter takes it with no attempt of its own (where it used to claim
// the key, six statements). Its place is gone, its fence is above the
// holder's, and its lease ends by the TTL counted from the grant's row.
func TestMySQLReleaseGrantsAnotherProcess(t *testing.T) {
	ctx := t.Context()
	ls := parkingProcesses(t, 2)
	a, b := ls[0], ls[1]
	db := driverOf(b)
	key := "grant-" + rand.Text()
	held, err := a.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	gotB := lockAsync(ctx, t, b, key)
	waitFor(t, "b parks", func() bool { return db.gates.parked(t, key) })
	attempts, handed := countAttempts(db), db.handoffs.count()
	released := time.Now()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lease := <-gotB
	arrived := time.Now()
	if lease == nil {
		t.FailNow()
	}
	if n := db.handoffs.count() - handed; n != 1 {
		t.Errorf("%d hand-offs to b, want its grant handed over", n)
	}
	if n := attempts.Load(); n != 0 {
		t.Errorf("b made %d attempts after the release, want none (the grant handed over)", n)
	}
	if lease.Fence() <= held.Fence() {
		t.Errorf("b's fence %d, not above a's %d", lease.Fence(), held.Fence())
	}
	if n := queued(t, db, key); n != 0 {
		t.Errorf("%d places left after the grant", n)
	}
	// lockAsync's TTL is 10 s: the grant's row lapses 10 s after the
	// release's statement, which ran between released and arrived.
	if d := lease.Deadline(); d.After(arrived.Add(10*time.Second)) || d.Before(released.Add(9*time.Second)) {
		t.Errorf("b's Deadline is %v after the release began and %v after b's Lock returned, want within the TTL of the grant",
			d.Sub(released), d.Sub(arrived))
	}
	if err := lease.Refresh(ctx); err != nil {
		t.Fatalf("the granted lease: %v", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.(locker.Admin).Status(ctx, key); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("after b's release: %v, want the key free", err)
	}
}

// A release may grant the key to a waiter whose gate is not parked yet
// (here: the waiter kept its place with no look, and its gate parks only
// after the grant): the park finds the key held by its process's first
// waiter, does not sleep, and the grant is handed over at once, not when
// the park's time is up (the waiter's TTL, a minute).
func TestMySQLGrantBeforeTheParkIsHandedOver(t *testing.T) {
	ctx := t.Context()
	ls := parkingProcesses(t, 2)
	da, db := driverOf(ls[0]), driverOf(ls[1])
	key := "grant-early-" + rand.Text()
	h, held := myHolder(t, da, key)
	r := &driver.Request{Key: key, Owner: rand.Text(), ID: rand.Text(), TTL: time.Minute, Queue: true}
	wake, stop, err := db.Subscribe(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if g, err := db.placeOnce(ctx, db, r); err != nil || g.Hold != nil {
		t.Fatalf("the waiter's place: %v (%v)", g.Hold, err)
	}
	fence := xreleaseTo(t, da, h, held, nil, r) // a release in the other process
	db.gates.watch(key, r.TTL)
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken within 10s: its park slept on its own grant")
	}
	if n := db.gates.woken.Load(); n != 0 {
		t.Errorf("the park was interrupted %d times; it should not have slept", n)
	}
	g, err := db.Acquire(ctx, r)
	if err != nil || g.Hold == nil || g.Fence != fence {
		t.Fatalf("the waiter's grant: %v fence %d (%v), want the release's, fence %d", g.Hold, g.Fence, err, fence)
	}
	stop()
	if err := g.Hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A grant to a waiter that stopped waiting as it came (the release
// committed after the waiter's last look, before its call gave up) is
// no one's lease: its gate does not hand it over, and the call's Abandon
// releases it, so the key does not stay taken for the waiter's TTL.
func TestMySQLGrantToAWaiterThatGaveUp(t *testing.T) {
	ctx := t.Context()
	ls := parkingProcesses(t, 2)
	a, db := ls[0], driverOf(ls[1])
	key := "grant-gone-" + rand.Text()
	held, err := a.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	r, _, stop, _ := waiting(t, db, key)
	waitFor(t, "the waiter parks", func() bool { return db.gates.parked(t, key) })
	stop() // its call gives up; its place is still in the queue
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := a.(locker.Admin).Status(ctx, key)
	if err != nil || st.Fence <= held.Fence() {
		t.Fatalf("after the release: %+v (%v), want the key granted to the waiter's place", st, err)
	}
	waitFor(t, "the waiter's gate looks", func() bool { return db.gates.woken.Load() == 1 })
	if n := db.handoffs.count(); n != 0 {
		t.Fatalf("%d grants taken by a call that gave up", n)
	}
	db.Abandon(ctx, r)
	if _, err := a.(locker.Admin).Status(ctx, key); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("after the waiter's Abandon: %v, want the key free", err)
	}
}

// A holder that crashes (its keep-alive stops) holds the key until its
// row lapses, and no release interrupts the park of the waiter behind
// it: the waiter looks again as the row lapses (its refusal timed by the
// holder's time left) and takes the key, not when its park's time is up
// (the waiter's TTL, a minute here).
func TestMySQLWaiterLooksAsTheCrashedHolderLapses(t *testing.T) {
	ctx := t.Context()
	ls := parkingProcesses(t, 2)
	a, b := ls[0], ls[1]
	key := "grant-lapse-" + rand.Text()
	held, err := a.Lock(ctx, key, locker.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := lockAsync(ctx, t, b, key, locker.WithTTL(time.Minute))
	waitFor(t, "b parks", func() bool { return driverOf(b).gates.parked(t, key) })
	Crash(a)
	select {
	case lease := <-got:
		if lease == nil {
			t.FailNow()
		}
		if lease.Fence() <= held.Fence() {
			t.Errorf("b's fence %d, not above the crashed holder's %d", lease.Fence(), held.Fence())
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b did not get the key within 10s of a crash whose row lapses in 1s: it did not look as the row lapsed")
	}
}

// A gate's look leaves alone the grant that a release of its own process
// is handing to its next waiter (gates.handing): taken from the look, the
// lease could still be held, or be on its way out, when the release's own
// hand-over came and, finding the call no longer waiting, released it as
// an orphan's. Once that release is done, a look hands it over.
func TestMySQLLookLeavesTheReleasesOwnHandOver(t *testing.T) {
	t.Parallel()
	_, d := myHandoff(t)
	ctx := t.Context()
	key := "handoff-look-" + rand.Text()
	h, held := myHolder(t, d, key)
	r, _, stop, _ := waiting(t, d, key)
	defer stop()
	handedHere := func() bool {
		d.handoffs.mu.Lock()
		defer d.handoffs.mu.Unlock()
		_, ok := d.handoffs.m[r.ID]
		return ok
	}
	done := d.gates.handing(key, r.ID) // as handOff does, before its procedure
	fence := xreleaseTo(t, d, h, held, r, r)
	pc, err := d.gates.take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.gates.put(pc, true)
	d.gates.look(ctx, pc, key)
	if handedHere() {
		t.Fatal("the look handed over the grant that the release here is handing over")
	}
	done()
	d.gates.look(ctx, pc, key)
	g, taken := d.handoffs.take(r.ID)
	if !taken || g.fence != fence {
		t.Fatalf("after the release: the look handed over %v (fence %d), want the grant, fence %d", taken, g.fence, fence)
	}
	stop()
	_ = (&hold{d: d, key: key, owner: r.Owner, id: r.ID, fence: fence}).Release(ctx)
}

// A hold's mark that its call took its grant from the database itself
// (foundOwn) stays until its release is done: a hand-over of that grant
// arriving during the release finds it and leaves the hold to it, where,
// with the mark gone as the release began, it released the row as an
// orphan's beside the holder's own release, and one of the two said
// ErrNotHeld.
func TestMySQLFoundOwnMarkOutlastsTheRelease(t *testing.T) {
	t.Parallel()
	_, d := myHandoff(t)
	ctx := t.Context()
	r := &driver.Request{Key: "handoff-mark-" + rand.Text(), Owner: rand.Text(), ID: rand.Text(), TTL: time.Minute}
	g, err := d.Acquire(ctx, r)
	if err != nil || g.Hold == nil {
		t.Fatalf("%v (%v)", g.Hold, err)
	}
	d.handoffs.foundOwn(r.ID)
	marked := func() bool {
		d.handoffs.mu.Lock()
		defer d.handoffs.mu.Unlock()
		return d.handoffs.found[r.ID]
	}
	var during bool
	release := d.releaseOnce
	d.releaseOnce = func(ctx context.Context, h *hold) (bool, bool, error) {
		during = marked()
		return release(ctx, h)
	}
	if err := g.Hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !during {
		t.Error("the mark was gone while the release ran: a hand-over then would release the hold as an orphan's")
	}
	if marked() {
		t.Error("the mark outlived the release: marks would pile up")
	}
}
