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
	early := d.handoffs.earlyCount()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	g, ok := d.handoffs.take(r.ID)
	if !ok {
		t.Fatalf("no hand-off for the waiter when Unlock returned (%d given by a release before)", early)
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
	t.Logf("grants given by a release's answer before their NOTIFY: %d", d.handoffs.earlyCount()-early)
}
