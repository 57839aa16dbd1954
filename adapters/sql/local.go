package sql

import (
	"math"
	"slices"
	"sync"

	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/wait"
)

// localQueue orders this process's waiters on each key where waiters poll
// (SQLite, MySQL): only the first of a key looks at the database on the
// poll backoff, to hear of other processes' releases; the others wait
// until a release here, or the first leaving, wakes them by their IDs
// (see run). 400 waiters in one process then poll as one. Waiters
// are in arrival order, or where the database queues them too (MySQL) in
// the database's order, once their place there is known (place), so that
// the one that polls is the one whose turn comes first. The waiters at
// the head that may hold the key together (readers; or up to n Limited
// waiters of one Limit n) are its run: a release wakes them all, and each
// may look, so that a run of readers is let in at once, not one after
// another.
type localQueue struct {
	mu   sync.Mutex
	keys map[string][]waiter
	// handed are the grants that a transaction here handed to waiters
	// here (handoff.go).
	handed handoffs
}

type waiter struct {
	id    string
	seq   uint64 // the place in the database's queue; unknown: MaxUint64
	mode  driver.Mode
	r     *driver.Request // a copy of the call's request, for a hand-off
	limit int             // a Limited call's Limit
}

func newLocalQueue() *localQueue { return &localQueue{keys: map[string][]waiter{}} }

// join adds r's call to the end of its key's queue.
func (q *localQueue) join(r *driver.Request) {
	c := &driver.Request{Key: r.Key, Owner: r.Owner, ID: r.ID, Mode: r.Mode, Space: r.Space, TTL: r.TTL, Queue: true, Limit: r.Limit}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.keys[r.Key] = append(q.keys[r.Key], waiter{r.ID, math.MaxUint64, r.Mode, c, r.Limit})
}

// request is the request of id's call waiting for key here, or nil.
func (q *localQueue) request(key, id string) *driver.Request {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := q.index(key, id); i >= 0 {
		return q.keys[key][i].r
	}
	return nil
}

// run is how many waiters at the head of ws may hold the key together:
// compatible ones, or Limited ones of one Limit n, at most n of them.
func run(ws []waiter) int {
	for i := range ws {
		if ws[i].mode == driver.Limited && i >= ws[i].limit {
			return i
		}
		for _, w := range ws[:i] {
			if !w.mode.Compatible(ws[i].mode) && !(w.mode == driver.Limited && ws[i].mode == driver.Limited && w.limit == ws[i].limit) {
				return i
			}
		}
	}
	return len(ws)
}

// place records id's place in the database's queue, moving it ahead of
// the waiters behind that place or with none known yet. It reports the
// key's first waiter if that changed, else "".
func (q *localQueue) place(key, id string, seq uint64) (first string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ws := q.keys[key]
	i := q.index(key, id)
	if i < 0 || ws[i].seq == seq {
		return ""
	}
	was, w := ws[0].id, ws[i]
	ws = slices.Delete(ws, i, i+1)
	j := slices.IndexFunc(ws, func(w waiter) bool { return w.seq > seq })
	if j < 0 {
		j = len(ws)
	}
	w.seq = seq
	ws = slices.Insert(ws, j, w)
	q.keys[key] = ws
	if ws[0].id != was {
		return ws[0].id
	}
	return ""
}

func (q *localQueue) index(key, id string) int {
	return slices.IndexFunc(q.keys[key], func(w waiter) bool { return w.id == id })
}

// leave takes id out of key's queue and reports whether it was the first.
func (q *localQueue) leave(key, id string) (first bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := q.index(key, id)
	if i < 0 {
		return false
	}
	if ws := slices.Delete(q.keys[key], i, i+1); len(ws) == 0 {
		delete(q.keys, key)
	} else {
		q.keys[key] = ws
	}
	return i == 0
}

// polls reports whether id is to poll: it is first in key's queue, or in
// none (a call that does not wait yet).
func (q *localQueue) polls(key, id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.index(key, id) <= 0
}

// wake wakes key's run of waiters through hub, reporting whether there
// is one.
func (q *localQueue) wake(hub *wait.Hub, key string) bool {
	q.mu.Lock()
	ws := q.keys[key]
	ids := make([]string, run(ws))
	for i := range ids {
		ids[i] = ws[i].id
	}
	q.mu.Unlock()
	for _, id := range ids {
		hub.Notify(id)
	}
	return len(ids) > 0
}

// has reports whether id waits for key here.
func (q *localQueue) has(key, id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.index(key, id) >= 0
}

// first is the ID of key's first waiter, or "".
func (q *localQueue) first(key string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if ws := q.keys[key]; len(ws) > 0 {
		return ws[0].id
	}
	return ""
}

// behind reports whether another call of this process waits for key ahead
// of id (any waiter, if id does not wait yet) that it may not hold the key
// with: id then leaves the key to it, so that this process serves its
// waiters in arrival order. A call in the run, or one that would join it
// (a reader behind a run of readers), may look.
func (q *localQueue) behind(key, id string, mode driver.Mode) bool {
	return q.behindAs(key, id, mode, 0)
}

// behindAs is behind for a call of a Limit (Limited mode).
func (q *localQueue) behindAs(key, id string, mode driver.Mode, limit int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	ws := q.keys[key]
	i := q.index(key, id)
	if i < 0 {
		return run(append(slices.Clip(ws), waiter{id: id, seq: math.MaxUint64, mode: mode, limit: limit})) <= len(ws)
	}
	return i >= run(ws)
}
