package sql

import (
	"testing"

	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/wait"
)

const x = driver.Exclusive

func TestLocalQueueFirstPolls(t *testing.T) {
	q := newLocalQueue()
	if !q.polls("k", "a") {
		t.Fatal("a call that does not wait yet must poll")
	}
	q.join(&driver.Request{Key: "k", ID: "a", Mode: x})
	q.join(&driver.Request{Key: "k", ID: "b", Mode: x})
	q.join(&driver.Request{Key: "k", ID: "c", Mode: x})
	q.join(&driver.Request{Key: "other", ID: "d", Mode: x})
	if !q.polls("k", "a") || q.polls("k", "b") || q.polls("k", "c") || !q.polls("other", "d") {
		t.Fatal("only the first waiter of each key polls")
	}
	if q.behind("k", "a", x) || !q.behind("k", "b", x) || !q.behind("k", "new", x) || q.behind("free", "x", x) {
		t.Fatal("behind: a call is behind the first waiter of its key, unless it is the first")
	}
	if q.leave("k", "b") {
		t.Fatal("b was not first")
	}
	if !q.leave("k", "a") || !q.polls("k", "c") {
		t.Fatal("after the first left, the next polls")
	}
	if !q.leave("k", "c") || len(q.keys["k"]) != 0 || q.leave("k", "c") {
		t.Fatal("an empty key is forgotten; leaving twice is a no-op")
	}
}

func TestLocalQueueTakesTheDatabasesOrder(t *testing.T) {
	q := newLocalQueue()
	q.join(&driver.Request{Key: "k", ID: "a", Mode: x})
	q.join(&driver.Request{Key: "k", ID: "b", Mode: x})
	q.join(&driver.Request{Key: "k", ID: "c", Mode: x})
	if got := q.place("k", "b", 7); got != "b" {
		t.Fatalf("b placed, a's place unknown: first = %q, want b", got)
	}
	if got := q.place("k", "a", 9); got != "" || q.first("k") != "b" {
		t.Fatalf("a placed behind b: first changed to %q", got)
	}
	if got := q.place("k", "c", 8); got != "" || !q.polls("k", "b") || q.polls("k", "c") {
		t.Fatalf("c placed between b and a: first changed to %q", got)
	}
	if !q.leave("k", "b") || q.first("k") != "c" || q.place("k", "c", 8) != "" || q.place("k", "gone", 1) != "" {
		t.Fatal("after b, c (8) comes before a (9); placing again or a stranger changes nothing")
	}
}

// Readers at the head are a run: a release wakes them all, and each may
// look; a writer, and whoever is behind it, waits its turn.
func TestLocalQueueLetsARunOfReadersIn(t *testing.T) {
	q := newLocalQueue()
	s := driver.Shared
	q.join(&driver.Request{Key: "k", ID: "r1", Mode: s})
	q.join(&driver.Request{Key: "k", ID: "r2", Mode: s})
	q.join(&driver.Request{Key: "k", ID: "w", Mode: x})
	q.join(&driver.Request{Key: "k", ID: "r3", Mode: s})
	if q.behind("k", "r1", s) || q.behind("k", "r2", s) || !q.behind("k", "w", x) || !q.behind("k", "r3", s) {
		t.Fatal("r1 and r2 may look; w and r3 behind it wait")
	}
	if !q.behind("k", "new", s) || !q.behind("k", "new", x) {
		t.Fatal("a newcomer is behind the writer, whatever its mode")
	}
	hub := wait.NewHub(localChannel{})
	woken := map[string]<-chan struct{}{}
	for _, id := range []string{"r1", "r2", "w", "r3"} {
		c, stop, err := hub.Subscribe(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		woken[id] = c
	}
	if !q.wake(hub, "k") {
		t.Fatal("wake found nobody")
	}
	for id, want := range map[string]bool{"r1": true, "r2": true, "w": false, "r3": false} {
		select {
		case <-woken[id]:
			if !want {
				t.Errorf("%s woken, behind the writer", id)
			}
		default:
			if want {
				t.Errorf("%s not woken, in the run", id)
			}
		}
	}
	q.leave("k", "w")
	if q.behind("k", "r3", s) || q.behind("k", "new", s) || !q.behind("k", "new", x) {
		t.Fatal("with the writer gone, readers may look; a new writer waits")
	}
}
