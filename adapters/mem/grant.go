package mem

import (
	"fmt"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// A key's state and the rule by which driver.ModeKeeper grants it: every
// check costs the holders and waiters that could refuse the request, never
// the others (a subtree's top node may have many compatible intention
// holders), and lapsed ones are dropped as they are met.

// entry is one key's holders, by mode and owner, and its queue, by mode in
// arrival order. It is dropped once both are empty.
type entry struct {
	holders [len(modes)]map[string]*holder
	queue   [len(modes)][]*waiter
	limit   int // the Limit of its Limited holders (driver.Limiter)
}

// modes are the modes this driver keeps: the matrix's and Limited.
var modes = [...]driver.Mode{driver.Exclusive, driver.Shared, driver.IntentShared, driver.IntentExclusive, driver.Limited}

// holder is one owner's hold of a key in one mode: its hold ids (one per
// lease, re-entry adding more), fence and expiry.
type holder struct {
	owner   string
	mode    driver.Mode
	holds   map[string]bool
	fence   uint64
	expires time.Time
}

// waiter is a Lock call's place in a key's queue, which lapses unless the
// call looks again in time (it does, at least every TTL/3).
type waiter struct {
	id      string
	arrived uint64
	expires time.Time
}

func newEntry() *entry {
	e := &entry{}
	for i := range e.holders {
		e.holders[i] = map[string]*holder{}
	}
	return e
}

// verdict is what the rule says of a request: re-enter holder, grant anew
// (ok), or refuse, looking again within retry.
type verdict struct {
	ok    bool
	join  *holder
	retry time.Duration
}

// decide applies the rule to r without changing anything but lapsed
// entries. Callers hold s.mu.
func (s *lockSpace) decide(r *driver.Request, now time.Time) (verdict, error) {
	e := s.locks[name{r.Space, r.Key}]
	if e == nil {
		return verdict{ok: true}, nil
	}
	for _, m := range modes { // 1, 2: re-entry, or a mismatch
		hd := e.live(m, r.Owner, now)
		switch {
		case hd == nil:
		case m == r.Mode:
			return verdict{ok: true, join: hd}, nil
		default:
			return verdict{}, fmt.Errorf("%w: owner %q holds %q as %v, asks for %v", locker.ErrModeMismatch, r.Owner, r.Key, m, r.Mode)
		}
	}
	if err := e.limitMismatch(r, now); err != nil {
		return verdict{}, err
	}
	mine := ^uint64(0) // not queued: after every waiter
	if w := e.waiter(r.ID); w != nil {
		mine = w.arrived
	}
	if r.Mode == driver.Limited {
		return s.decideLimited(e, r, now, mine), nil
	}
	for _, m := range modes { // 3: compatible with holders and earlier waiters
		if r.Mode.Compatible(m) {
			continue
		}
		if hd := e.anyLive(m, now); hd != nil {
			return verdict{retry: s.place(e, r, now, hd.expires.Sub(now))}, nil
		}
		if w := e.head(m, now); w != nil && w.arrived < mine {
			return verdict{retry: s.place(e, r, now, w.expires.Sub(now))}, nil
		}
	}
	return verdict{ok: true}, nil
}

// place keeps r's place in the queue if it queues (4), and returns how long
// it may wait without a notification: until what refused it lapses, and
// in time to keep its place.
func (s *lockSpace) place(e *entry, r *driver.Request, now time.Time, left time.Duration) time.Duration {
	if !r.Queue {
		return left
	}
	w := e.waiter(r.ID)
	if w == nil {
		s.arrived++
		w = &waiter{id: r.ID, arrived: s.arrived}
		e.queue[r.Mode] = append(e.queue[r.Mode], w)
	}
	w.expires = now.Add(r.TTL)
	return min(left, r.TTL/3)
}

// apply grants r as v says, and returns its grant. Callers hold s.mu.
func (s *lockSpace) apply(r *driver.Request, v verdict, now time.Time) driver.Grant {
	n := name{r.Space, r.Key}
	e := s.locks[n]
	if e == nil {
		e = newEntry()
		s.locks[n] = e
	}
	e.leave(r.ID)
	if r.Mode == driver.Limited {
		e.limit = r.Limit
	}
	hd := v.join
	if hd == nil {
		s.fence = max(s.fence, r.Floor) + 1
		hd = &holder{owner: r.Owner, mode: r.Mode, holds: map[string]bool{}, fence: s.fence}
		e.holders[r.Mode][r.Owner] = hd
		signal(s.watches[n])
	}
	hd.holds[r.ID] = true
	hd.expires = later(hd.expires, now.Add(r.TTL)) // a re-entry never shortens
	h := &hold{s: s, n: n, owner: r.Owner, mode: r.Mode, id: r.ID, ttl: r.TTL}
	return driver.Grant{Hold: h, Fence: hd.fence}
}

// live returns owner's live holder in mode m, dropping a lapsed one.
func (e *entry) live(m driver.Mode, owner string, now time.Time) *holder {
	hd := e.holders[m][owner]
	if hd != nil && !now.Before(hd.expires) {
		delete(e.holders[m], owner)
		return nil
	}
	return hd
}

// anyLive returns a live holder in mode m, dropping lapsed ones on the way.
func (e *entry) anyLive(m driver.Mode, now time.Time) *holder {
	for owner, hd := range e.holders[m] {
		if now.Before(hd.expires) {
			return hd
		}
		delete(e.holders[m], owner)
	}
	return nil
}

// head returns the first live waiter in mode m, dropping lapsed ones.
func (e *entry) head(m driver.Mode, now time.Time) *waiter {
	q := e.queue[m]
	for len(q) > 0 && !now.Before(q[0].expires) {
		q = q[1:]
	}
	e.queue[m] = q
	if len(q) == 0 {
		return nil
	}
	return q[0]
}

// waiter returns the place of call id, or nil.
func (e *entry) waiter(id string) *waiter {
	for _, q := range e.queue {
		for _, w := range q {
			if w.id == id {
				return w
			}
		}
	}
	return nil
}

// leave drops call id's place; true if it had one.
func (e *entry) leave(id string) bool {
	for m, q := range e.queue {
		for i, w := range q {
			if w.id == id {
				e.queue[m] = append(q[:i:i], q[i+1:]...)
				return true
			}
		}
	}
	return false
}

func (e *entry) empty() bool {
	for m := range e.holders {
		if len(e.holders[m]) > 0 || len(e.queue[m]) > 0 {
			return false
		}
	}
	return true
}
