package sql

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/perproc"
	"github.com/locker-go/locker/internal/wait"
)

// keyState is what a refused claim reads: the key's row (ids "" if none),
// the ms until the first live waiter ahead of the call lapses (0: none),
// the call's place in the queue (0: none), whether Limited holders
// hold the key (a mismatch), and whether a waiter ahead is one whose
// grant interrupts no park (then the call polls: mysql_park.go).
type keyState struct {
	owner, ids        string
	fence, seq        uint64
	left, ahead       int64
	limited, unparked bool
}

// read takes or keeps the call's place (if it queues; lapsed places are
// cleared) and reads the key's state, in one round trip where the
// connection takes several statements. Limited holders are a mismatch
// (the place it took, Abandon leaves).
func (m *myStatements) read(ctx context.Context, d *sqlDriver, r *driver.Request, token string, ttl int64) (s keyState, err error) {
	dest := []any{&s.owner, &s.fence, &s.ids, &s.left, &s.ahead, &s.seq, &s.limited, &s.unparked}
	if token == "" {
		err = row(d.db.QueryRowContext(ctx, m.state, stateArgs(r.Key, token, false)...), dest...)
	} else {
		start := time.Now()
		if err = m.enqueue(ctx, d, r, token, ttl, dest); err == nil {
			callOf(r).placed = start
			d.place(r, s.seq)
		}
	}
	if err == nil && s.limited {
		err = limitedHeld(r, 0)
	}
	return s, err
}

// enqueue takes or keeps a place, now and then clears lapsed ones (left
// by waiters that crashed: they keep nobody waiting), and reads the state
// into dest.
func (m *myStatements) enqueue(ctx context.Context, d *sqlDriver, r *driver.Request, token string, ttl int64, dest []any) error {
	gc, key := rand.IntN(16) == 0, r.Key
	if m.multi {
		proc := d.gates.procID()
		q, args := m.wait, []any{key, token, ttl, proc, r.Owner, ttl}
		if gc {
			q, args = m.waitGC, append(args, key)
		}
		args = append(args, key, proc)
		rows, err := d.db.QueryContext(ctx, q, append(args, stateArgs(key, token, true)...)...)
		if err != nil {
			return err
		}
		return scanLast(rows, dest...)
	}
	if _, err := d.db.ExecContext(ctx, m.place, key, token, ttl, d.gates.procID(), r.Owner, ttl); err != nil {
		return err
	}
	if gc {
		if _, err := d.db.ExecContext(ctx, m.gc, key); err != nil {
			return err
		}
	}
	if proc := d.gates.procID(); proc != "" {
		if _, err := d.db.ExecContext(ctx, m.mark, key, proc); err != nil {
			return err
		}
	}
	return row(d.db.QueryRowContext(ctx, m.state, stateArgs(key, token, false)...), dest...)
}

// placeOnce keeps the place of a waiter behind another of this process's,
// in one statement that also returns the place's seq: the waiter needs no
// more (the key's state costs a statement three times a place's, and the
// first waiter here reads it). A release here that hands the waiter the
// key deletes its place; a place kept after that, which puts the waiter
// back in the queue, is taken out when the waiter takes its grant
// (sqlDriver.settle).
func (m *myStatements) placeOnce(ctx context.Context, d *sqlDriver, r *driver.Request) (driver.Grant, error) {
	c, start := callOf(r), time.Now()
	ttl := r.TTL.Milliseconds()
	res, err := d.db.ExecContext(ctx, m.place, r.Key, d.token(r), ttl, d.gates.procID(), r.Owner, ttl)
	if err != nil {
		return driver.Grant{}, err
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return driver.Grant{}, err
	}
	c.placed, c.placeHeard = start, time.Now()
	d.place(r, uint64(seq))
	return driver.Grant{Retry: r.TTL / 3}, nil // a release here, or the first here leaving, wakes it
}

// mySetup: this process's Lockers on one pool and table share a hub and
// a queue by which a release here wakes the key's first waiter here at
// once (see localQueue), and gates by which a release in another process
// does (see gates).
func mySetup(ctx context.Context, d *sqlDriver, m *myStatements) error {
	w, release, err := waiters.Get(ctx, listenerKey{d.db, d.cfg.table},
		func() (localWaiters, error) {
			// Named locks are the server's, not the database's.
			var database string
			if err := d.retry(ctx, func(ctx context.Context) error {
				return d.db.QueryRowContext(ctx, "SELECT COALESCE(DATABASE(), '')").Scan(&database)
			}, nil); err != nil {
				return localWaiters{}, err
			}
			hub, local := wait.NewHub(localChannel{}), newLocalQueue()
			parking := !d.handOffOff.Load() && killable(ctx, d.db, d.cfg.table+myXReleaseName)
			return localWaiters{hub, local, newGates(d.db, database+"\x00"+d.cfg.table, m, parking, hub, local)}, nil
		},
		func(w localWaiters) { w.gates.close() })
	if err != nil {
		return err
	}
	d.poll, d.queued, d.hub, d.local, d.gates, d.stop = true, true, w.hub, w.local, w.gates, release
	d.handoffs = &w.local.handed // a release here may hand this process's waiters the key (myXReleaseProc)
	return nil
}

// waiters are what this process's MySQL Lockers on one pool and table
// share: the wake-up hub, the order of their waiters, and the gates.
var waiters perproc.Map[listenerKey, localWaiters]

type localWaiters struct {
	hub   *wait.Hub
	local *localQueue
	gates *gates
}
