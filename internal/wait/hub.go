// Package wait holds what drivers share for notified waiting: a Hub fans
// one backend subscription per key out to the waiters of one Locker. (The
// wait loop itself is the portable Locker's, in package locker.)
package wait

import (
	"context"
	"sync"
)

// Channel is a backend's per-key notification subscription, as a Hub uses it.
type Channel interface {
	// Subscribe starts notifications for key and returns once the backend
	// has confirmed it, so no release after it returns is missed.
	Subscribe(ctx context.Context, key string) error
	// Unsubscribe stops them.
	Unsubscribe(key string)
}

// Hub fans release notifications out to the waiters of one Locker, holding
// one backend subscription per key however many local waiters share it.
// Adapters feed Notify from their notification stream (Redis pub/sub,
// Postgres LISTEN) and pass Hub.Subscribe to Until.
type Hub struct {
	ch   Channel
	one  bool // Notify wakes one waiter per key, not all
	mu   sync.Mutex
	keys map[string]*entry
	seq  uint64 // arrival order of waiters
}

type entry struct {
	op         sync.Mutex // orders this key's backend (un)subscribe calls
	subscribed bool       // guarded by op
	waiters    map[chan struct{}]uint64
}

// NewHub returns a Hub that subscribes through ch and wakes every waiter
// of a key on Notify: for backends that queue waiters, where the waiter
// whose turn it is must hear of it.
func NewHub(ch Channel) *Hub { return &Hub{ch: ch, keys: map[string]*entry{}} }

// NewWakeOneHub returns a Hub whose Notify wakes only the longest-waiting
// waiter of the key: for backends where any waiter may take a free key
// (Redis, Redlock), so that a release costs each Locker one attempt, not
// one per waiter (400 waiters would otherwise all race for every release).
// A waiter that leaves passes a wake on to the next, so a wake taken by
// one that then gave up (or took the key) is not lost to the others.
func NewWakeOneHub(ch Channel) *Hub { return &Hub{ch: ch, one: true, keys: map[string]*entry{}} }

// Subscribe registers a waiter for key, subscribing at the backend if it is
// the first. Its signature fits Until once bound to a key.
func (h *Hub) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return h.SubscribeInOrder(ctx, key, nil)
}

// SubscribeInOrder is Subscribe, calling inOrder (if not nil) as the
// waiter takes its place among the key's waiters, in that order: a
// backend that orders waiters itself (Redlock's waiting marks) gives each
// its place there, so that the one a wake-one Notify wakes, the longest
// waiting here, is also the first there.
func (h *Hub) SubscribeInOrder(ctx context.Context, key string, inOrder func()) (<-chan struct{}, func(), error) {
	c := make(chan struct{}, 1)
	h.mu.Lock()
	e := h.keys[key]
	if e == nil {
		e = &entry{waiters: map[chan struct{}]uint64{}}
		h.keys[key] = e
	}
	h.seq++
	e.waiters[c] = h.seq
	if inOrder != nil {
		inOrder()
	}
	h.mu.Unlock()

	e.op.Lock()
	defer e.op.Unlock()
	if !e.subscribed {
		if err := h.ch.Subscribe(ctx, key); err != nil {
			h.leave(key, e, c)
			return nil, nil, err
		}
		e.subscribed = true
	}
	return c, func() {
		e.op.Lock()
		defer e.op.Unlock()
		h.leave(key, e, c)
	}, nil
}

// leave drops waiter c; the last one out unsubscribes. Callers hold e.op,
// so a waiter arriving meanwhile subscribes again only after this ends.
func (h *Hub) leave(key string, e *entry, c chan struct{}) {
	h.mu.Lock()
	delete(e.waiters, c)
	empty := len(e.waiters) == 0
	if h.one {
		h.wake(e)
	}
	h.mu.Unlock()
	if !empty {
		return
	}
	if e.subscribed {
		h.ch.Unsubscribe(key)
		e.subscribed = false
	}
	// Forget the entry only now: until the unsubscribe is sent, a newcomer
	// joins this entry and waits on e.op, so backend calls stay in order.
	h.mu.Lock()
	if len(e.waiters) == 0 && h.keys[key] == e {
		delete(h.keys, key)
	}
	h.mu.Unlock()
}

// Notify wakes the waiters for key: every one, or for a wake-one Hub the
// longest-waiting.
func (h *Hub) Notify(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.keys[key]; e != nil {
		h.wake(e)
	}
}

// wake signals e's waiters as Notify says. Callers hold h.mu.
func (h *Hub) wake(e *entry) {
	if !h.one {
		for c := range e.waiters {
			signal(c)
		}
		return
	}
	var first chan struct{}
	for c, seq := range e.waiters {
		if first == nil || seq < e.waiters[first] {
			first = c
		}
	}
	if first != nil {
		signal(first)
	}
}

// NotifyEvery wakes every waiter for key, even on a wake-one Hub: for
// news meant for one of them that the Hub cannot tell apart (Redlock's
// hand-off to one call), so that the one it is for hears it whatever
// its place here.
func (h *Hub) NotifyEvery(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.keys[key]; e != nil {
		for c := range e.waiters {
			signal(c)
		}
	}
}

// NotifyAll wakes every waiter, e.g. after a reconnect in which
// notifications may have been lost.
func (h *Hub) NotifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.keys {
		for c := range e.waiters {
			signal(c)
		}
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default: // a wake is already pending
	}
}

// Waiting reports whether key has a waiter here: a notification that
// carries something for its waiter (a hand-off's fence) is kept only then.
func (h *Hub) Waiting(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.keys[key] != nil
}
