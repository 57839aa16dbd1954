package sql

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// The modal path: what is not one Exclusive hold the Exclusive statements
// take in one round trip (a Shared or intention request; an Exclusive
// waiter where the dialect keeps no queue of its own) is decided in Go,
// by driver.ModeKeeper's rule, inside one transaction that first
// serializes the key with every other change to it (modeQueries.lock).

// holder is a row of the key's holders: the lock row (an Exclusive holder,
// or the header, owner "") or one of the holders table.
type holder struct {
	owner string
	mode  driver.Mode
	fence uint64
	holds int
	ids   string // " id1 id2 "
	left  int64  // ms until it lapses; <= 0: lapsed
	lim   int    // a Limited holder's Limit (limit.go), else 0
}

// place is a waiter's place in the key's queue.
type place struct {
	token string
	mode  driver.Mode
	seq   int64
	left  int64
	lim   int // a Limited waiter's Limit, else 0
}

// modeState is what a modal transaction read of one key.
type modeState struct {
	header  *holder  // the lock row, if any
	holders []holder // the holders table's rows, lapsed ones included
	queue   []place  // by seq, lapsed ones included
	wake    []string // the waiters to wake at commit
	// limitedGrant: the transaction granted a Limited request, which may
	// hand this process's Limited waiters their slots (txn.handOff)
	limitedGrant bool
}

// txn is one modal transaction: its connection's view of d.
type txn struct {
	d  *sqlDriver
	tx querier // the transaction, running the driver's prepared statements
}

// read reads key's rows.
func (t txn) read(ctx context.Context, key string) (*modeState, error) {
	rows, err := t.d.mq.state.query(ctx, t.tx, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	s := &modeState{}
	for rows.Next() {
		var (
			kind, mode int
			h          holder
			seq        int64
			fence      int64
		)
		if err := rows.Scan(&kind, &h.owner, &mode, &fence, &h.holds, &h.ids, &h.left, &seq, &h.lim); err != nil {
			return nil, err
		}
		h.mode, h.fence = driver.Mode(mode), uint64(fence)
		switch kind {
		case 0:
			s.header = &h
		case 1:
			s.holders = append(s.holders, h)
		default:
			s.queue = append(s.queue, place{token: h.owner, mode: h.mode, seq: seq, left: h.left, lim: h.lim})
		}
	}
	slices.SortFunc(s.queue, func(a, b place) int { return int(a.seq - b.seq) })
	return s, rows.Err()
}

// exclusive is the live Exclusive holder, if any.
func (s *modeState) exclusive() *holder {
	if h := s.header; h != nil && h.owner != "" && h.left > 0 {
		return h
	}
	return nil
}

// live returns the live holders, the Exclusive one first.
func (s *modeState) live() []*holder {
	var out []*holder
	if h := s.exclusive(); h != nil {
		out = append(out, h)
	}
	for i := range s.holders {
		if s.holders[i].left > 0 {
			out = append(out, &s.holders[i])
		}
	}
	return out
}

// verdict is the rule's answer to a request: join a holder, grant anew,
// or refuse for retry ms.
type verdict struct {
	ok    bool
	join  *holder
	retry int64
}

// decide applies driver.ModeKeeper's rule to r, whose place (if it
// queues) is token's.
func (s *modeState) decide(r *driver.Request, token string) (verdict, error) {
	live := s.live()
	for _, h := range live { // 1, 2: re-entry, or a mismatch
		if h.owner == r.Owner {
			if h.mode != r.Mode {
				return verdict{}, fmt.Errorf("%w: owner %q holds %q as %v, asks for %v", locker.ErrModeMismatch, r.Owner, r.Key, h.mode, r.Mode)
			}
			return verdict{ok: true, join: h}, nil
		}
	}
	if err := limitMismatch(r, live); err != nil { // 2, of driver.Limiter: any owner's
		return verdict{}, err
	}
	if r.Mode == driver.Limited {
		return s.decideLimited(r, token, live), nil
	}
	for _, h := range live { // 3: compatible with the holders
		if !r.Mode.Compatible(h.mode) {
			return verdict{retry: h.left}, nil
		}
	}
	for _, p := range s.queue { // and with the waiters before r
		if token != "" && p.token == token {
			break
		}
		if p.left > 0 && !r.Mode.Compatible(p.mode) {
			return verdict{retry: p.left}, nil
		}
	}
	return verdict{ok: true}, nil
}

// placeOf is token's live place, if it has one.
func (s *modeState) placeOf(token string) *place {
	for i := range s.queue {
		if token != "" && s.queue[i].token == token {
			return &s.queue[i]
		}
	}
	return nil
}

// seqOf is token's place in the queue's order: its seq, or for a place
// yet to be taken, one past the last (the queue is serialized by key and
// its seqs increase, so this orders it among the places as its own seq
// will, which is all localQueue needs).
func (s *modeState) seqOf(token string) int64 {
	if p := s.placeOf(token); p != nil {
		return p.seq
	}
	var last int64
	for _, p := range s.queue {
		last = max(last, p.seq)
	}
	return last + 1
}

// admit sets s.wake to the live waiters, from the first, that the live
// holders and the waiters before them admit: the readers behind a writer
// that lets go all go at once, not each woken by the one before; the
// Limited waiters within the key's free slots (limit.go).
func (s *modeState) admit(except string) {
	s.wake = s.wake[:0]
	live := s.live()
	for _, p := range s.queue {
		if p.left <= 0 || p.token == except {
			continue
		}
		if p.mode == driver.Limited {
			if !admitsLimited(live, p) {
				return
			}
			s.wake = append(s.wake, p.token)
			live = append(live, &holder{mode: p.mode, lim: max(p.lim, 1)})
			continue
		}
		switch h := incompatible(live, p.mode); {
		case h == nil:
			s.wake = append(s.wake, p.token)
			live = append(live, &holder{mode: p.mode})
		case h.mode != driver.Limited:
			return
		default: // behind a Limited holder or waiter: not admitted, but the Limited waiters behind it may be
		}
	}
}

// incompatible is the first of live that mode m does not admit, or nil.
func incompatible(live []*holder, m driver.Mode) *holder {
	for _, h := range live {
		if !m.Compatible(h.mode) {
			return h
		}
	}
	return nil
}

// withID returns ids with id added, and whether it was missing.
func withID(ids, id string) (string, bool) {
	if strings.Contains(ids, " "+id+" ") {
		return ids, false
	}
	if ids == "" {
		ids = " "
	}
	return ids + id + " ", true
}

// withoutID returns ids without id, and whether it was there.
func withoutID(ids, id string) (string, bool) {
	if !strings.Contains(ids, " "+id+" ") {
		return ids, false
	}
	return strings.Replace(ids, " "+id+" ", " ", 1), true
}

// lockKey serializes key's changes in tx until commit: the dialect's lock
// statement, unless tx took the database's write lock as it began
// (SQLite's BEGIN IMMEDIATE), which serializes every change.
func (d *sqlDriver) lockKey(ctx context.Context, tx querier, key string) error {
	if d.immediate {
		return nil
	}
	return d.mq.lock.exec(ctx, tx, key)
}
