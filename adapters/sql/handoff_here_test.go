package sql

import (
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/locker-go/locker"
)

// A release in the waiter's own process hands it the key as the release
// returns, not when the NOTIFY comes round through the server and the
// LISTEN connection: the grant is there when Unlock returns. The NOTIFY
// then gives nothing more: a grant heard twice is given once, so a call
// that took it (and, had it come dead, gave it back and waits on under
// the same ID) is never given a hold already released.
func TestPostgresReleaseHandsOverInProcess(t *testing.T) {
	t.Parallel()
	l, d := pgHandoff(t)
	ctx := t.Context()
	key := "handoff-here-" + rand.Text()
	holder, err := l.Lock(ctx, key, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	r, wake, stop, _ := waiting(t, d, key)
	defer stop()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	g, ok := d.handoffs.take(r.ID)
	if !ok {
		t.Fatal("no hand-off for the waiter when Unlock returned")
	}
	if g.fence <= holder.Fence() {
		t.Fatalf("handed fence %d, not above the holder's %d", g.fence, holder.Fence())
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken")
	}
	payload := r.ID + " " + strconv.FormatUint(g.fence, 10)
	if _, gave := d.handoffs.heard(payload, d.hub.Waiting); gave {
		t.Fatal("the grant, heard again, was given again")
	}
	if _, ok := d.handoffs.take(r.ID); ok {
		t.Fatal("a second hand-off of one grant")
	}
	hd := &hold{d: d, key: key, owner: r.Owner, id: r.ID, fence: g.fence, ttl: r.TTL}
	if err := hd.Release(ctx); err != nil {
		t.Fatalf("the handed hold: %v", err)
	}
}

// A grant comes twice to a waiter of the releasing process, the two
// copies in either order: each is given once, and a late copy of an
// earlier grant (one given back dead, the call queued again under the
// same ID and granted anew) does not replace the later grant.
func TestHandoffsGiveEachGrantOnce(t *testing.T) {
	var h handoffs
	waiting := true
	heard := func(payload string, want bool) {
		t.Helper()
		if _, gave := h.heard(payload, func(string) bool { return waiting }); gave != want {
			t.Fatalf("heard %q: gave %v, want %v", payload, gave, want)
		}
	}
	take := func(want uint64) {
		t.Helper()
		g, ok := h.take("X")
		if got := map[bool]uint64{true: g.fence}[ok]; got != want {
			t.Fatalf("took fence %d (%v), want %d", g.fence, ok, want)
		}
	}
	heard("X 5", true)
	take(5)
	heard("X 5", false) // the other copy, after the grant was taken
	heard("X 9", true)  // granted anew, after it gave 5 back
	heard("X 5", false) // a late copy of the first
	take(9)
	heard("X 9", false)
	take(0)
	if h.stopped("X") {
		t.Fatal("a hand-off left after both were taken")
	}
	waiting = false
	heard("X 12", false) // the call stopped waiting
	take(0)
}

// A grant that the waiter's own statement found under its ID is not
// given again by its hand-off, heard before or after: a call that gave it
// back, dead, would take it again and waste a try.
func TestHandoffsSkipAGrantFoundInTheDatabase(t *testing.T) {
	var h handoffs
	waiting := func(string) bool { return true }
	h.held("X", 5, waiting)
	if _, gave := h.heard("X 5", waiting); gave {
		t.Fatal("the hand-off of a grant the call found itself was given")
	}
	if _, gave := h.heard("X 7", waiting); !gave {
		t.Fatal("a later grant was not given")
	}
	if _, gave := h.heard("Y 4", waiting); !gave {
		t.Fatal("Y's grant was not given")
	}
	h.held("Y", 4, waiting)
	if g, ok := h.take("Y"); ok {
		t.Fatalf("Y's hand-off (fence %d) left after its statement found the grant", g.fence)
	}
	if g, ok := h.take("X"); !ok || g.fence != 7 {
		t.Fatalf("X's later grant: %d (%v), want 7", g.fence, ok)
	}
}
