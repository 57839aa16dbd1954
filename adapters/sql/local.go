package sql

import (
	"slices"
	"sync"
)

// localQueue orders this process's waiters on each key where waiters poll
// (SQLite, MySQL): only the first of a key looks at the database on the
// poll backoff, to hear of other processes' releases; the others wait,
// without a round trip, until they are first (a release here, or the first
// leaving, wakes the next by its ID). 400 waiters in one process then poll
// as one, and take the key in arrival order among themselves.
type localQueue struct {
	mu   sync.Mutex
	keys map[string][]string // waiting call IDs, in arrival order
}

func newLocalQueue() *localQueue { return &localQueue{keys: map[string][]string{}} }

func (q *localQueue) join(key, id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.keys[key] = append(q.keys[key], id)
}

// leave takes id out of key's queue and reports whether it was the first.
func (q *localQueue) leave(key, id string) (first bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ids := q.keys[key]
	i := slices.Index(ids, id)
	if i < 0 {
		return false
	}
	if ids = slices.Delete(ids, i, i+1); len(ids) == 0 {
		delete(q.keys, key)
	} else {
		q.keys[key] = ids
	}
	return i == 0
}

// polls reports whether id is to poll: it is first in key's queue, or in
// none (a call that does not wait yet).
func (q *localQueue) polls(key, id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	ids := q.keys[key]
	return len(ids) == 0 || ids[0] == id || !slices.Contains(ids, id)
}

// first is the ID of key's first waiter, or "".
func (q *localQueue) first(key string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if ids := q.keys[key]; len(ids) > 0 {
		return ids[0]
	}
	return ""
}

// behind reports whether another call of this process waits for key ahead
// of id (any waiter, if id does not wait yet): id then leaves the key to
// it, so that this process serves its waiters in arrival order.
func (q *localQueue) behind(key, id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	ids := q.keys[key]
	return len(ids) > 0 && ids[0] != id
}
