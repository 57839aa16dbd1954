package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"time"

	"github.com/locker-go/locker/driver"
)

// A direct hand-off (SQLite): the release of an Exclusive hold whose
// key this process's first waiter waits for, Exclusive, at the head of
// the database's queue, gives that waiter the key's row in one statement
// (handDirect; its place goes by trigger), where the modal transaction
// (releaseHandingOff) reads the key's whole state first, a hand-off's
// most costly statement. Where the key is not that plain (another hold
// on the row, a holder of another mode, another waiter first, a Limit)
// the statement changes nothing and the modal transaction decides.

// nextDirect is the waiter that h's release may hand the key to
// directly: this process's first waiter for h's key (firstHere), if it
// waits Exclusive with a place in the queue; else nil.
func (d *sqlDriver) nextDirect(h *hold) *driver.Request {
	if d.mq.handDirect.q == "" {
		return nil
	}
	r := d.firstHere(h)
	if r == nil || r.Mode != driver.Exclusive || !r.Queue {
		return nil
	}
	return r
}

// handDirect releases h by handing its key to next in one statement
// (its place goes by trigger, in the statement's transaction): ok if it
// did, and the grant is then next's (handOver); not ok, it changed
// nothing. One statement, not a transaction of three: every statement
// with a context that can end costs the SQLite driver a goroutine that
// watches it, and BEGIN and COMMIT each one more than the work they do.
func (d *sqlDriver) handDirect(ctx context.Context, h *hold, next *driver.Request) (ok bool, err error) {
	start := time.Now() // the grant's validity counts from before its statement
	var fence int64
	err = d.mq.handDirect.row(ctx, d.pool(), h.key, h.owner, int64(h.fence), h.id, next.Owner, next.ID, next.TTL.Milliseconds()).Scan(&fence)
	if errors.Is(err, dbsql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	d.handoffs.direct.Add(1)
	d.handOver(ctx, h.key, []handed{{id: next.ID, owner: next.Owner, fence: uint64(fence), mode: driver.Exclusive}}, start)
	return true, nil
}
