package sql

import "testing"

func TestLocalQueueFirstPolls(t *testing.T) {
	q := newLocalQueue()
	if !q.polls("k", "a") {
		t.Fatal("a call that does not wait yet must poll")
	}
	q.join("k", "a")
	q.join("k", "b")
	q.join("k", "c")
	q.join("other", "d")
	if !q.polls("k", "a") || q.polls("k", "b") || q.polls("k", "c") || !q.polls("other", "d") {
		t.Fatal("only the first waiter of each key polls")
	}
	if q.behind("k", "a") || !q.behind("k", "b") || !q.behind("k", "new") || q.behind("free", "x") {
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
	q.join("k", "a")
	q.join("k", "b")
	q.join("k", "c")
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
