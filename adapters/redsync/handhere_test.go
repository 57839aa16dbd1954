package redsync

import (
	"context"
	"fmt"
	"slices"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// deafen ends d's subscriptions: no message of any master reaches it.
func deafen(d *redlock) {
	for _, m := range d.masters {
		close(m.quit)
		_ = m.ps.Close()
		<-m.done
		m.ps = nil
	}
}

// A waiter whose driver is in the releasing process, on the same masters
// in the same order, is given each master's copy of the hand-off from the
// release's replies: with no message of the masters reaching it, it is
// woken and holds the key with no attempt of its own.
func TestReleaseHandsOverInProcess(t *testing.T) {
	a, b, attempts, _ := handoffDrivers(t)
	key := uniqueKey(t, "k")
	first := take(t, a, exclusive(key))
	r := exclusive(key)
	woken := queueBehind(t, b, r)
	deafen(b)
	before := attempts[0].n.Load()
	releaseWakes(t, first.Hold, woken)
	a.bg.Wait() // every master's reply, the quorum's and the rest
	g := take(t, b, r)
	if n := attempts[0].n.Load() - before; n != 0 {
		t.Errorf("the handed waiter sent %d attempts to take the key; want none", n)
	}
	if g.Fence <= first.Fence {
		t.Errorf("handed fence %d, not above the last holder's %d", g.Fence, first.Fence)
	}
	if err := g.Hold.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A driver of the releasing process over the same masters in another
// order is given no copy from the replies: a master's index would name
// another master to it, and copies counted by index could make a quorum
// of fewer masters.
func TestReleaseHandsNothingOverAcrossMasterOrders(t *testing.T) {
	a, _, _, clients := handoffDrivers(t)
	reversed := slices.Clone(clients)
	slices.Reverse(reversed)
	b, err := newDriver(reversed, WithPrefix(a.cfg.prefix), WithNodeTimeout(suiteNodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	key := uniqueKey(t, "k")
	first := take(t, a, exclusive(key))
	r := exclusive(key)
	queueBehind(t, b, r)
	deafen(b)
	if err := first.Hold.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.bg.Wait()
	st := stateOf(r)
	if copies := b.news.handedTo(hubKey(nameOf(r), r.Mode), st.pend.id, st.pend.on); len(copies) != 0 {
		t.Fatalf("%d copies of the hand-off reached a driver of another master order", len(copies))
	}
}

// mastersOf names a master by its address and database, so that two
// drivers that dialled the same masters apart name them alike.
func TestMastersOfNamesAddresses(t *testing.T) {
	named := func(addrs ...string) string {
		var ms []*master
		for _, a := range addrs {
			c := goredis.NewClient(&goredis.Options{Addr: a})
			t.Cleanup(func() { _ = c.Close() })
			ms = append(ms, &master{client: c})
		}
		return mastersOf(ms)
	}
	if x, y := named("h:1", "h:2"), named("h:1", "h:2"); x != y {
		t.Errorf("the same masters named %q and %q", x, y)
	}
	if x, y := named("h:1", "h:2"), named("h:2", "h:1"); x == y {
		t.Errorf("masters in another order named alike, %q", fmt.Sprint(x))
	}
}
