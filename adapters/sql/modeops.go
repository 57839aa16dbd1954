package sql

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// The modal path's operations, each one transaction (see modes.go).

// modal reports whether r takes the modal path: any mode but Exclusive,
// and an Exclusive waiter where the dialect keeps no queue of its own
// (SQLite), so that a shared request arriving later sees it waiting.
func (d *sqlDriver) modal(r *driver.Request) bool {
	return r.Mode != driver.Exclusive || (r.Queue && !d.queued)
}

// modalToken is a modal call's place in the queue: its ID once it queues.
func modalToken(r *driver.Request) string {
	if r.Queue {
		return r.ID
	}
	return ""
}

// txOnce runs fn once in a transaction that has serialized key, then
// wakes the waiter fn admitted: by NOTIFY at commit (Postgres), or here.
func (d *sqlDriver) txOnce(ctx context.Context, key string, fn func(ctx context.Context, t txn, s *modeState) error) error {
	start := time.Now()
	tx, err := d.db.BeginTx(ctx, d.txOptions)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	t := txn{d, d.prep.in(tx)}
	if err := d.lockKey(ctx, t.tx, key); err != nil {
		return err
	}
	s, err := t.read(ctx, key)
	if err != nil {
		return err
	}
	if err := fn(ctx, t, s); err != nil {
		return err
	}
	var hs []handed
	if d.handsOffHere() && len(s.wake) > 0 {
		if hs, err = t.handOff(ctx, key, s); err != nil {
			return err
		}
	}
	if len(s.wake) > 0 && d.mq.notify.q != "" {
		if err := d.mq.notify.exec(ctx, tx, strings.Join(s.wake, " ")); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	d.handOver(ctx, key, hs, start)
	d.wakeAdmitted(key, s)
	return nil
}

// acquireModal is one attempt of a modal request: granted, refused (its
// place kept if it queues), or ErrModeMismatch, changing nothing.
func acquireModal(ctx context.Context, d *sqlDriver, r *driver.Request) (g driver.Grant, err error) {
	var (
		mismatch error
		seq      int64 // the call's place, in the queue's order
	)
	if g, ok, err := grantFast(ctx, d, r); ok || err != nil {
		return g, err
	}
	if g, full, err := d.limitFull(ctx, r); full || err != nil {
		return g, err
	}
	token := modalToken(r)
	start := time.Now()
	err = d.txOnce(ctx, r.Key, func(ctx context.Context, t txn, s *modeState) error {
		if err := t.gc(ctx, r.Key, s); err != nil {
			return err
		}
		v, err := s.decide(r, token)
		switch {
		case err != nil:
			mismatch = err // not retried: commit what gc did, and fail
			return nil
		case !v.ok:
			g = driver.Grant{Retry: msDuration(v.retry)}
			seq = s.seqOf(token)
			return t.keepPlace(ctx, r, s, token)
		}
		g, err = t.grant(ctx, r, s, v.join)
		return err
	})
	if mismatch != nil {
		return driver.Grant{}, mismatch
	}
	if err == nil && g.Hold == nil && token != "" {
		c := callOf(r)
		c.placed, c.modalPlace = start, true
		if d.poll {
			d.place(r, uint64(seq))
		}
	}
	return g, err
}

// gc deletes the key's lapsed holders and places.
func (t txn) gc(ctx context.Context, key string, s *modeState) error {
	var holders []holder
	for _, h := range s.holders {
		if h.left > 0 {
			holders = append(holders, h)
		}
	}
	if len(holders) < len(s.holders) {
		if err := t.d.mq.gcHolders.exec(ctx, t.tx, key); err != nil {
			return err
		}
		s.holders = holders
	}
	var queue []place
	for _, p := range s.queue {
		if p.left > 0 {
			queue = append(queue, p)
		}
	}
	if len(queue) < len(s.queue) {
		if err := t.d.mq.gcQueue.exec(ctx, t.tx, key); err != nil {
			return err
		}
		s.queue = queue
	}
	return nil
}

// keepPlace takes or keeps a refused request's place for its TTL.
func (t txn) keepPlace(ctx context.Context, r *driver.Request, s *modeState, token string) error {
	switch {
	case token == "":
		return nil
	case s.placeOf(token) != nil:
		return t.d.mq.touch.exec(ctx, t.tx, r.Key, token, int(r.Mode), r.TTL.Milliseconds(), limitOf(r))
	}
	return t.d.mq.enqueue.exec(ctx, t.tx, r.Key, token, int(r.Mode), r.TTL.Milliseconds(), limitOf(r), r.Owner)
}

// grant makes r a holder (joining join, its owner's, if set), takes it
// out of the queue, and wakes the next waiter if it may go too.
func (t txn) grant(ctx context.Context, r *driver.Request, s *modeState, join *holder) (driver.Grant, error) {
	ttl := r.TTL.Milliseconds()
	h := join
	if h != nil {
		ids, more := withID(h.ids, r.ID)
		if more {
			h.holds++
		}
		h.ids, h.left = ids, max(h.left, ttl)
	} else {
		fence, err := t.draw(ctx)
		if err != nil {
			return driver.Grant{}, err
		}
		h = &holder{owner: r.Owner, mode: r.Mode, fence: fence, holds: 1, ids: " " + r.ID + " ", left: ttl, lim: limitOf(r)}
	}
	if err := t.put(ctx, r.Key, s, h, join == nil); err != nil {
		return driver.Grant{}, err
	}
	if p := s.placeOf(modalToken(r)); p != nil {
		if err := t.d.mq.dequeue.exec(ctx, t.tx, r.Key, p.token); err != nil {
			return driver.Grant{}, err
		}
		p.left = 0
		s.admit("")
	}
	if err := t.cover(ctx, r.Key, s); err != nil {
		return driver.Grant{}, err
	}
	s.limitedGrant = s.limitedGrant || r.Mode == driver.Limited
	hd := (&hold{d: t.d, key: r.Key, owner: r.Owner, id: r.ID, fence: h.fence, ttl: r.TTL, mode: r.Mode}).written()
	return driver.Grant{Hold: hd, Fence: h.fence}, nil
}

// draw draws a fence above every earlier one of the table.
func (t txn) draw(ctx context.Context) (uint64, error) {
	if t.d.mq.drawSet.q != "" {
		if err := t.d.mq.drawSet.exec(ctx, t.tx); err != nil {
			return 0, err
		}
	}
	var fence int64
	err := t.d.mq.draw.row(ctx, t.tx).Scan(&fence)
	return uint64(fence), err
}

// put writes holder h of key, added to s if new: an Exclusive one is the
// lock row, the others are the holders table's.
func (t txn) put(ctx context.Context, key string, s *modeState, h *holder, isNew bool) error {
	mq := t.d.mq
	if h.mode == driver.Exclusive {
		args := []any{key, h.owner, int64(h.fence), h.holds, h.ids, h.left}
		if s.header == nil {
			s.header = h
			return mq.addHeader.exec(ctx, t.tx, args...)
		}
		s.header = h
		return mq.setHeader.exec(ctx, t.tx, args...)
	}
	args := []any{key, h.owner, int(h.mode), int64(h.fence), h.holds, h.ids, h.left, h.lim}
	if isNew {
		s.holders = append(s.holders, *h)
		return mq.addHolder.exec(ctx, t.tx, args...)
	}
	return mq.setHolder.exec(ctx, t.tx, args...)
}

// cover keeps the lock row true to the other holders: while any is live
// and no Exclusive holder, a header (owner "") lapsing with the last of
// them keeps the Exclusive statements out; else none.
func (t txn) cover(ctx context.Context, key string, s *modeState) error {
	if s.exclusive() != nil {
		return nil
	}
	var left int64
	var fence uint64
	for _, h := range s.holders {
		if h.left > 0 {
			left, fence = max(left, h.left), max(fence, h.fence)
		}
	}
	mq := t.d.mq
	switch hd := s.header; {
	case left == 0 && hd == nil:
		return nil
	case left == 0:
		s.header = nil
		return mq.dropHeader.exec(ctx, t.tx, key)
	case hd == nil:
		s.header = &holder{fence: fence, holds: 1, ids: " ", left: left}
		return mq.addHeader.exec(ctx, t.tx, key, "", int64(fence), 1, " ", left)
	case hd.owner == "" && hd.left == left:
		return nil
	}
	s.header = &holder{fence: fence, holds: 1, ids: " ", left: left}
	return mq.setHeader.exec(ctx, t.tx, key, "", int64(fence), 1, " ", left)
}

// find returns the holder of h (any fence if h.fence is 0).
func (s *modeState) find(h *hold) *holder {
	for i := range s.holders {
		x := &s.holders[i]
		if x.owner == h.owner && x.mode == h.mode && (h.fence == 0 || x.fence == h.fence) {
			return x
		}
	}
	return nil
}

// releaseModal is one attempt of a modal hold's release: ok if the hold
// was there, freed if no holder is left.
func releaseModal(ctx context.Context, h *hold) (ok, freed bool, err error) {
	if ok, freed, err = releaseFast(ctx, h); ok || err != nil {
		return ok, freed, err
	}
	err = h.d.txOnce(ctx, h.key, func(ctx context.Context, t txn, s *modeState) error {
		x := s.find(h)
		if x == nil {
			return nil
		}
		ids, had := withoutID(x.ids, h.id)
		if !had {
			return nil
		}
		ok = true
		x.ids, x.holds = ids, x.holds-1
		mq := t.d.mq
		args := []any{h.key, x.owner, int(x.mode), int64(x.fence)}
		if x.holds > 0 {
			err = mq.setHolder.exec(ctx, t.tx, append(args, x.holds, x.ids, max(x.left, 1))...)
		} else {
			x.left = 0
			err = mq.dropHolder.exec(ctx, t.tx, args...)
		}
		if err != nil {
			return err
		}
		freed = len(s.live()) == 0
		s.admit("")
		return t.cover(ctx, h.key, s)
	})
	return ok, freed, err
}

// releaseHandingOff is one attempt of an Exclusive hold's release where
// this process has waiters for the key and they are modal (SQLite): in a
// modal transaction, whose commit hands the key to them (txn.handOff),
// where the release statement would only wake them to look.
func releaseHandingOff(ctx context.Context, h *hold) (ok, freed bool, err error) {
	if next := h.d.nextDirect(h); next != nil {
		if ok, err := h.d.handDirect(ctx, h, next); ok || err != nil {
			return ok, false, err
		}
	}
	err = h.d.txOnce(ctx, h.key, func(ctx context.Context, t txn, s *modeState) error {
		x := s.header // live or not, as the release statement finds it
		if x == nil || x.owner == "" || x.owner != h.owner || (h.fence != 0 && x.fence != h.fence) {
			return nil
		}
		ids, had := withoutID(x.ids, h.id)
		if !had {
			return nil
		}
		ok = true
		if x.ids, x.holds = ids, x.holds-1; x.holds > 0 {
			return t.d.mq.setHeader.exec(ctx, t.tx, h.key, x.owner, int64(x.fence), x.holds, x.ids, x.left)
		}
		s.header = nil
		if err := t.d.mq.dropHeader.exec(ctx, t.tx, h.key); err != nil {
			return err
		}
		freed = len(s.live()) == 0
		s.admit("")
		return t.cover(ctx, h.key, s)
	})
	return ok, freed, err
}

// refreshModal is one attempt of a modal hold's refresh: ok if it is live.
func refreshModal(ctx context.Context, h *hold) (ok bool, err error) {
	err = h.d.txOnce(ctx, h.key, func(ctx context.Context, t txn, s *modeState) error {
		x := s.find(h)
		if x == nil || x.left <= 0 || !containsID(x.ids, h.id) {
			return nil
		}
		ok = true
		x.left = max(x.left, h.ttl.Milliseconds())
		if err := t.d.mq.setHolder.exec(ctx, t.tx, h.key, x.owner, int(x.mode), int64(x.fence), x.holds, x.ids, x.left); err != nil {
			return err
		}
		return t.cover(ctx, h.key, s)
	})
	return ok, err
}

// expireModal deletes a modal hold's holder once it has lapsed.
func expireModal(ctx context.Context, h *hold) (deleted bool, err error) {
	err = h.d.txOnce(ctx, h.key, func(ctx context.Context, t txn, s *modeState) error {
		x := s.find(h)
		if x == nil || x.left > 0 {
			return nil
		}
		deleted = true
		if err := t.d.mq.dropHolder.exec(ctx, t.tx, h.key, x.owner, int(x.mode), int64(x.fence)); err != nil {
			return err
		}
		s.admit("")
		return t.cover(ctx, h.key, s)
	})
	return deleted, err
}

// forceModal deletes key's Shared, Limited and Exclusive holders (not
// intention holders: they are no locks of their own): held if one was
// live.
func forceModal(ctx context.Context, d *sqlDriver, key string) (held bool, err error) {
	err = d.txOnce(ctx, key, func(ctx context.Context, t txn, s *modeState) error {
		held = s.exclusive() != nil
		var kept []holder
		for _, h := range s.holders {
			if h.mode == driver.Shared || h.mode == driver.Limited {
				held = held || h.left > 0
			} else {
				kept = append(kept, h)
			}
		}
		if len(kept) < len(s.holders) {
			if err := t.d.mq.dropShared.exec(ctx, t.tx, key); err != nil {
				return err
			}
			s.holders = kept
		}
		if s.header != nil && s.header.owner != "" {
			s.header = nil
			if err := t.d.mq.dropHeader.exec(ctx, t.tx, key); err != nil {
				return err
			}
		}
		s.admit("")
		return t.cover(ctx, key, s)
	})
	return held, err
}

// leaveModal takes a modal call out of the queue, waking the next waiter
// if it was waiting behind it.
func (d *sqlDriver) leaveModal(ctx context.Context, r *driver.Request) {
	_ = d.retry(ctx, func(ctx context.Context) error {
		return d.txOnce(ctx, r.Key, func(ctx context.Context, t txn, s *modeState) error {
			p := s.placeOf(r.ID)
			if p == nil {
				return nil
			}
			p.left = 0
			if err := t.d.mq.dequeue.exec(ctx, t.tx, r.Key, r.ID); err != nil {
				return err
			}
			s.admit("")
			return nil
		})
	}, nil)
}

func containsID(ids, id string) bool {
	_, missing := withID(ids, id)
	return !missing
}

// mismatch returns ErrModeMismatch if r's owner, refused the key in
// Exclusive mode, holds it in another.
func (d *sqlDriver) mismatch(ctx context.Context, r *driver.Request) error {
	var mode int = -1
	if err := d.retry(ctx, func(ctx context.Context) error {
		return row(d.mq.ownerMode.row(ctx, d.db, r.Key, r.Owner), &mode)
	}, nil); err != nil || mode < 0 {
		return err
	}
	return fmt.Errorf("%w: owner %q holds %q as %v, asks for %v", locker.ErrModeMismatch, r.Owner, r.Key, driver.Mode(mode), r.Mode)
}
