package sql

import (
	"context"
	"fmt"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// Semaphores (driver.Limiter, locker.Limit): a Limited request takes the
// modal path, decided in Go (modeState.decide) in the modal transaction,
// except where the fast lane grants, refuses and releases one by the same
// rule in one call (grantLimited, releaseFast: Postgres, MySQL), declining
// what the transaction must decide. Its holders are rows of the holders table in
// mode Limited, each with the key's n in its lim column, so that a request
// of another n meets it (rule 2); waiters keep their n in the queue's lim
// column, so that a release that leaves no holder knows how many of them
// it admits. The lock table's header covers Limited holders as it does
// Shared ones: an Exclusive statement finds the key held, and its
// refusal's read says that Limited holders hold (ErrModeMismatch).
// Postgres's hand-off function grants the Limited waiters a release
// admits, as it grants the other modes'. Elsewhere a release wakes them
// rather than granting them: where a process's gate serializes its
// transactions (SQLite), the first to look takes its slot and hands this
// process's others admitted then theirs, so that slots freed by releases
// in a row are granted together, not one transaction apart.

// KeepsLimits declares that Acquire grants Limited requests by the rule
// driver.Limiter states.
func (*sqlDriver) KeepsLimits() {}

var _ driver.Limiter = (*sqlDriver)(nil)

// limitMismatch is rule 2 of driver.Limiter for r among the key's live
// holders: a Limited request meeting holders of another mode or of
// another Limit, or another mode's request meeting Limited holders.
func limitMismatch(r *driver.Request, live []*holder) error {
	for _, h := range live {
		switch {
		case r.Mode != driver.Limited && h.mode == driver.Limited:
			return limitedHeld(r, h.lim)
		case r.Mode == driver.Limited && h.mode != driver.Limited:
			return fmt.Errorf("%w: %q is held as %v, asked for by a Limit(%d)", locker.ErrModeMismatch, r.Key, h.mode, r.Limit)
		case r.Mode == driver.Limited && h.lim != r.Limit:
			return fmt.Errorf("%w: %q is held by a Limit(%d), asked for by a Limit(%d)", locker.ErrModeMismatch, r.Key, h.lim, r.Limit)
		}
	}
	return nil
}

// limitedHeld is the mismatch of r, not Limited, with Limited holders of
// Limit lim (0: not known).
func limitedHeld(r *driver.Request, lim int) error {
	if lim == 0 {
		return fmt.Errorf("%w: %q is held by a Limit, asked for as %v", locker.ErrModeMismatch, r.Key, r.Mode)
	}
	return fmt.Errorf("%w: %q is held by a Limit(%d), asked for as %v", locker.ErrModeMismatch, r.Key, lim, r.Mode)
}

// decideLimited is rule 3 of driver.Limiter for r, whose place (if it
// queues) is token's, once rule 2 found every live holder Limited with
// r's Limit: granted while fewer than r.Limit owners hold the key,
// counting the live Limited waiters queued before r; else refused until
// the first of those lapses.
func (s *modeState) decideLimited(r *driver.Request, token string, live []*holder) verdict {
	taken, first := 0, int64(0)
	take := func(left int64) {
		if taken == 0 || left < first {
			first = left
		}
		taken++
	}
	for _, h := range live {
		take(h.left)
	}
	for _, p := range s.queue {
		if token != "" && p.token == token {
			break
		}
		if p.left > 0 && p.mode == driver.Limited {
			take(p.left)
		}
	}
	if taken < r.Limit {
		return verdict{ok: true}
	}
	return verdict{retry: first}
}

// admitsLimited reports whether the Limited waiter p may go beside live,
// the key's live holders and the waiters admitted before p: no other
// mode is among them, and fewer than n Limited ones, n being their Limit
// (or p's, if none).
func admitsLimited(live []*holder, p place) bool {
	n, taken := max(p.lim, 1), 0
	for _, h := range live {
		if h.mode != driver.Limited {
			return false
		}
		if taken == 0 {
			n = max(h.lim, 1)
		}
		taken++
	}
	return taken < n
}

// limitOf is r's Limit if it is Limited, else 0 (the lim column).
func limitOf(r *driver.Request) int {
	if r.Mode == driver.Limited {
		return r.Limit
	}
	return 0
}

// limitWait is the column that an Exclusive refusal's read (queries.wait,
// MySQL's state) adds: whether Limited holders hold the key ($1), whose
// header refused it. An Exclusive request meeting them is a mismatch.
const limitWait = `EXISTS (SELECT 1 FROM {h} WHERE {k} = $1 AND mode = 4 AND expires_at > {now})`

// wakeAdmitted wakes, after a modal transaction's commit, the waiters it
// admitted (s.wake) where waiters poll: this process's run of waiters
// (notify); or, Limited ones, exactly those it admitted that wait here,
// the first of which to look takes every slot free by then and hands
// this process's others theirs (txn.handOff).
func (d *sqlDriver) wakeAdmitted(key string, s *modeState) {
	if len(s.wake) == 0 {
		return
	}
	if p := s.placeOf(s.wake[0]); !d.poll || p == nil || p.mode != driver.Limited {
		d.notify(key)
		return
	}
	d.gates.freed(key)
	for _, id := range s.wake {
		d.hub.Notify(id)
	}
}

// limitFull is a polling Limited waiter's look before its transaction
// (where waiters poll: SQLite, MySQL): one read that takes no lock, and
// full if the key's live Limited holders and the Limited waiters before
// r's place take its n slots already: r is refused with no transaction,
// and a poll of many waiters does not queue on the key's lock ahead of
// the releases. A place due to be kept, and a look that may be granted,
// go to the transaction, which decides.
func (d *sqlDriver) limitFull(ctx context.Context, r *driver.Request) (driver.Grant, bool, error) {
	c := callOf(r)
	keep := r.TTL/3 - time.Since(c.placed)
	if !d.poll || r.Mode != driver.Limited || !r.Queue || !c.modalPlace || keep <= 0 {
		return driver.Grant{}, false, nil
	}
	var taken int
	if err := row(d.mq.limitTaken.row(ctx, d.db, r.Key, r.ID), &taken); err != nil || taken < r.Limit {
		return driver.Grant{}, false, err
	}
	return driver.Grant{Retry: keep}, true, nil
}
