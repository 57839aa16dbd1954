package redsync

import (
	"context"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/driver"
)

// publishAll publishes payload on key's channel on every master, in turn,
// each returning only after its master has delivered it.
func publishAll(t *testing.T, l *testLocker, clients []goredis.UniversalClient, key, payload string) {
	t.Helper()
	for i, c := range clients {
		if err := c.Publish(context.Background(), l.channel(name{driver.Plain, key}), payload).Err(); err != nil {
			t.Fatalf("PUBLISH on master %d: %v", i, err)
		}
	}
}

// A release wakes the waiters once, at the quorum-th copy (or when settled
// without it); it names the first waiter, and only a waiter after it whose
// mode it excludes stays put; copies that disagree name the later one, or
// none. A master's copy counts once, heard twice (by the releaser's reply
// and by the message: handHere).
func TestNewsOfReleases(t *testing.T) {
	n := &news{need: 3, keys: map[string]*keyNews{}}
	n.watch("k")
	for i, want := range []bool{false, false, true, false} {
		wake, first := n.heard("k", "a1 5 100 0 callA", i)
		if wake != want || (first != "") != (i == 0) {
			t.Fatalf("copy %d of a release: wake %v, first %q; want wake %v", i+1, wake, first, want)
		}
	}
	for _, c := range []struct {
		mode  driver.Mode
		stamp int64
		call  string
		want  bool
	}{
		{driver.Exclusive, 200, "callB", true},
		{driver.Shared, 200, "callB", true},
		{driver.IntentShared, 200, "callB", true},
		{driver.Exclusive, 50, "callZ", false},
		{driver.Exclusive, 100, "callA", false},
		{driver.Exclusive, 100, "callB", true},
	} {
		if got := n.behind("k", c.mode, c.stamp, c.call); got != c.want {
			t.Errorf("behind an X waiter (100, callA): %v waiter (%d, %s) = %v, want %v", c.mode, c.stamp, c.call, got, c.want)
		}
	}
	n.heard("k", "a1 5 300 0 callC", 4)
	if n.behind("k", driver.Exclusive, 200, "callB") {
		t.Error("a copy naming a later first waiter: a waiter before it still stays put")
	}
	n.heard("k", "a1 5", 5)
	if n.behind("k", driver.Exclusive, 400, "callD") {
		t.Error("a copy naming no waiter: a waiter still stays put")
	}

	for i, c := range []struct {
		master int
		want   bool
	}{{0, false}, {0, false}, {1, false}, {1, false}, {2, true}} {
		if wake, _ := n.heard("k", "b1 6", c.master); wake != c.want {
			t.Fatalf("copy %d (master %d) of a release: wake %v, want %v", i+1, c.master, wake, c.want)
		}
	}

	if wake, _ := n.heard("k", " 0 100 1 callS", 0); !wake {
		t.Error("a mark's removal did not wake the waiters")
	}
	if n.behind("k", driver.Shared, 200, "callB") || !n.behind("k", driver.Exclusive, 200, "callB") {
		t.Error("behind a shared first waiter: a later reader must look again, a later writer stay put")
	}

	if wake, first := n.heard("k", "r2 6", 0); wake || first != "r2" {
		t.Fatalf("first copy of release r2: wake %v, first %q", wake, first)
	}
	if !n.settle("k", "r2") || n.settle("k", "r2") {
		t.Error("settle must wake for a release once")
	}
	for range 3 {
		if wake, _ := n.heard("k", "r2 6", 0); wake {
			t.Error("a settled release woke the waiters again at its quorum")
		}
	}

	// An earlier version's take announcement wakes nobody, and is not
	// read as a release.
	if wake, first := n.heard("k", "tT1 1000000 9 1", 0); wake || first != "" {
		t.Errorf("a take announcement: wake %v, first %q; want neither", wake, first)
	}
}

// A hand-off's copies are kept by hold and master: the waiter counts one
// per master, and only from the masters it asks about (those that refused
// its attempt); the handed call is named as the first waiter.
func TestNewsOfHandoffs(t *testing.T) {
	n := &news{need: 3, keys: map[string]*keyNews{}}
	n.watch("k")
	for _, c := range []struct {
		payload string
		master  int
	}{
		{"a1 5 100 0 callA h 77 9 4", 0},
		{"a1 5 100 0 callA h 77 9 4", 0}, // the same master twice
		{"a1 5 100 0 callA h 77 10 2", 1},
		{"a1 5 100 0 callA h 77 9 6", 3},
		{"a1 5 100 0 callA h 78 9 6", 2}, // another hold
		{"a1 5 100 0 callA h 77 x 6", 4}, // malformed
	} {
		n.heard("k", c.payload, c.master)
	}
	got := n.handedTo("k", "77", []bool{true, true, true, false, true})
	for i := range got {
		if got[i].heard.IsZero() {
			t.Errorf("copy %d: no time heard", i)
		}
		got[i].heard = time.Time{}
	}
	want := []handCopy{
		{id: "77", master: 0, counter: 9, pended: 4 * time.Millisecond},
		{id: "77", master: 1, counter: 10, pended: 2 * time.Millisecond},
	}
	if !slices.Equal(got, want) {
		t.Errorf("handedTo(77) = %+v, want %+v", got, want)
	}
	if len(n.handedTo("nokey", "77", []bool{true})) != 0 {
		t.Error("copies reported for a key not watched")
	}
	if !n.behind("k", driver.Exclusive, 200, "callB") || n.behind("k", driver.Exclusive, 100, "callA") {
		t.Error("a hand-off must name the handed call as the first waiter")
	}
	n.heard("k", "a2 6 200 0 callB", 0) // a copy on the key's channel
	n.heard("k", "a2 6 200 0 callB h 79 11 1", 1)
	if !n.handedOff("k", "a1") || !n.handedOff("k", "a2") {
		t.Error("a release that a copy says handed the key is not reported handed off")
	}
	n.heard("k", "a3 7", 0)
	if n.handedOff("k", "a3") {
		t.Error("a release without a hand-off is reported handed off")
	}
}

// The copies of a hand-off wake its call once a release's quorum came;
// those of a slot handed to a Limited call wake it again as each later one
// comes, as it needs more of them (quorumOf) than that quorum.
func TestNewsOfLimitedHandoffsWakeAgain(t *testing.T) {
	for _, c := range []struct {
		mode string
		want []bool // woken by the copy from masters 0 to 4
	}{
		{"0", []bool{false, false, true, false, false}},
		{"4", []bool{false, false, true, true, true}},
	} {
		n := &news{need: 3, keys: map[string]*keyNews{}}
		n.watch("k")
		for i, want := range c.want {
			if wake, _ := n.heard("k", "a1 5 100 "+c.mode+" callA h 77 9 4", i); wake != want {
				t.Errorf("mode %s: copy %d woke %v, want %v", c.mode, i+1, wake, want)
			}
		}
	}
}
