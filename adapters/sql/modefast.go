package sql

import (
	"context"
	dbsql "database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/locker-go/locker/driver"
)

// The modal path's fast lane: where the database runs code of its own
// (a PL/pgSQL function, a MySQL procedure), the commonest modal calls are
// one round trip instead of a transaction of six or seven: a new holder
// that every live holder and every waiter before it admits (readers
// behind readers, a waiter from its place), and a release (Postgres wakes
// the waiters it admits by NOTIFY; MySQL's answer says whether the first
// waiter may go, and Release wakes this process's run of them). The
// function takes the same lock as the modal transaction
// (modeQueries.lock), so the two interleave safely; it declines (NULL),
// changing nothing, whatever it does not handle (a re-entry, a lapsed row
// to collect, a live Exclusive holder, a hold it cannot find live, a
// holder of another mode or Limit), and the transaction runs as before,
// as database/sql's driver.ErrSkip does. Limited requests and holds take
// the lane where it has a grant of their own (grantLimited: Postgres,
// MySQL); elsewhere the transaction decides them (limit.go).

// grantFast is one fast attempt of r: ok false if the lane declined or
// there is none. Postgres's, and a Limited request's, also refuses (a
// negative answer: the ms to wait), keeping a queued call's place.
func grantFast(ctx context.Context, d *sqlDriver, r *driver.Request) (g driver.Grant, ok bool, err error) {
	if d.mq.grantFast.q == "" || d.laneOff.Load() || r.Mode == driver.Exclusive || !d.laneTakes(r.Mode) {
		return driver.Grant{}, false, nil
	}
	var fence, seq dbsql.NullInt64
	start := time.Now()
	if r.Mode == driver.Limited {
		err = row(d.mq.grantLimited.row(ctx, d.db, r.Key, r.Owner, r.ID, r.TTL.Milliseconds(), r.Limit, modalToken(r)), &fence, &seq)
	} else {
		err = row(d.mq.grantFast.row(ctx, d.db, r.Key, r.Owner, r.ID, int(r.Mode), compatible(r.Mode), r.TTL.Milliseconds(), modalToken(r)), &fence)
	}
	switch {
	case err != nil || !fence.Valid:
		return driver.Grant{}, false, d.offLane(err)
	case fence.Int64 <= 0:
		if modalToken(r) != "" {
			c := callOf(r)
			c.placed, c.modalPlace = start, true
			if d.poll && seq.Int64 > 0 { // as the transaction's refusal (acquireModal)
				d.place(r, uint64(seq.Int64))
			}
		}
		return driver.Grant{Retry: msDuration(-fence.Int64)}, true, nil
	}
	f := uint64(fence.Int64)
	hd := (&hold{d: d, key: r.Key, owner: r.Owner, id: r.ID, fence: f, ttl: r.TTL, mode: r.Mode}).written()
	return driver.Grant{Hold: hd, Fence: f}, true, nil
}

// releaseFast is one fast release of h: done false if the lane declined
// or there is none; freed if it was the key's last holder, or if the
// first waiter may go now (3, where waiters poll: the lane wakes nobody,
// Release wakes this process's run of waiters, which look).
func releaseFast(ctx context.Context, h *hold) (done, freed bool, err error) {
	if h.d.mq.releaseFast.q == "" || h.d.laneOff.Load() || h.fence == 0 || !h.d.laneTakes(h.mode) {
		return false, false, nil // fence 0 (Abandon's): any of the owner's, the transaction's to find
	}
	var n dbsql.NullInt64
	err = row(h.d.mq.releaseFast.row(ctx, h.d.db, h.key, h.owner, int(h.mode), int64(h.fence), h.id), &n)
	return n.Valid, n.Int64 >= 2, h.d.offLane(err)
}

// laneTakes reports whether the lane takes requests and holds of mode
// m: every mode but Limited, and Limited too where it has grantLimited.
func (d *sqlDriver) laneTakes(m driver.Mode) bool {
	return m != driver.Limited || d.mq.grantLimited.q != ""
}

// offLane turns the lane off for good if err says it is not to be had
// here (the call changed nothing: the transaction goes on in its stead).
func (d *sqlDriver) offLane(err error) error {
	if err != nil && d.noLane != nil && d.noLane(err) {
		d.laneOff.Store(true)
		return nil
	}
	return err
}

// compatible is the set of modes m admits, a bit per mode's value.
func compatible(m driver.Mode) int {
	var set int
	for _, o := range driver.Modes {
		if m.Compatible(o) {
			set |= 1 << o
		}
	}
	return set
}

// admitsSQL is SQL for the set of modes that the mode in column col
// admits, as compatible gives it.
func admitsSQL(col string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "(CASE %s", col)
	for _, m := range driver.Modes {
		fmt.Fprintf(&b, " WHEN %d THEN %d", m, compatible(m))
	}
	b.WriteString(" ELSE 0 END)")
	return b.String()
}
