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
