package etcd

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// Semaphores (driver.Limiter). A Limited entry records its n (record.Limit)
// and holds the key once every entry before it is Limited with the same
// n and fewer than n precede it, holders and waiters alike: waiters are
// served in arrival order, and the fence of each grant, its create
// revision, rises with them. Rule 2 is judged as an entry is queued, by
// the first entry before it, which holds: a Limited entry holds only
// behind Limited ones of its n, any other only behind no Limited one.

// KeepsLimits declares that Acquire grants Limited requests by the rule
// driver.Limiter states.
func (d *etcdDriver) KeepsLimits() {}

var _ driver.Limiter = (*etcdDriver)(nil)

// mismatch is rule 2 of driver.Limiter for request r, whose queue's first
// entry (a holder) is first: a Limited request behind an entry of another
// mode or n, or another mode's behind a Limited one.
func mismatch(r *driver.Request, first *mvccpb.KeyValue) error {
	s, o := slotFor(r), slotOf(first)
	if err := driver.LimitConflict(r.Key, s.mode, o.mode, s.limit, o.limit); err != nil {
		return fmt.Errorf("%w: %w", locker.ErrModeMismatch, err)
	}
	return nil
}

// limitBlocker is what keeps a Limited entry of n behind before (the
// entries before it) from holding: the last entry of another mode or n (a
// mismatched call's, on its way out), else, with n or more before it, the
// n-th counting back; nil if it holds. Any of those n may go first and
// admit it, so a waiter counts them all down (waitLimit).
func limitBlocker(before []*mvccpb.KeyValue, n int) *mvccpb.KeyValue {
	mine := slot{driver.Limited, n}
	for i := len(before) - 1; i >= 0; i-- {
		if slotOf(before[i]) != mine {
			return before[i]
		}
	}
	if len(before) < n {
		return nil
	}
	return before[len(before)-n]
}

// mismatched is rule 2 for en's entry, just queued (create revision mine)
// behind before: all the entries before it, or for an Exclusive call the
// last alone. Only if that last is Limited is the first, which decides,
// read. (A call behind a mismatched call's entry on its way out, itself
// behind Limited holders, waits for them as it would for any holder.)
func (en *entry) mismatched(ctx context.Context, mine int64, before []*mvccpb.KeyValue) error {
	if len(before) == 0 {
		return nil
	}
	first := before[0]
	if en.r.Mode == driver.Exclusive {
		first = before[len(before)-1] // a queue behind a Limited entry holds Limited ones alone
		if modeOf(first) != driver.Limited {
			return nil
		}
		get := clientv3.OpGet(en.d.queue(en.r.Space, en.r.Key),
			append(clientv3.WithFirstCreate(), clientv3.WithPrefix(), clientv3.WithMaxCreateRev(mine-1))...)
		resp, err := en.d.txn(ctx, en.r.Key, nil, []clientv3.Op{get})
		if err != nil {
			return err
		}
		if kv := kvs(resp, 0); len(kv) > 0 {
			first = kv[0]
		}
	}
	return mismatch(en.r, first)
}

// waitLimit waits until en's Limited entry (create revision mine) holds
// the key; before are the entries before it, read at revision mine.
//
// No one entry's removal is needed to admit it (any of the n holders may
// go first), so it does not watch one as waitTurn does: one watch of the
// queue's deletions, from the server's current revision, counts off the
// entries before it; once the count admits it, it holds without a read
// if the watch showed every change since its creating txn (as waitTurn),
// else it reads (as check does), so that a release makes the one waiter
// it admits read, not every one. It keeps the etcd lease alive meanwhile.
func (en *entry) waitLimit(ctx context.Context, mine int64, before []*mvccpb.KeyValue) error {
	readRev := mine
	tick := time.NewTicker(max(en.lease.granted/3, 100*time.Millisecond))
	defer tick.Stop()
	q := en.d.queue(en.r.Space, en.r.Key)
	for {
		wch, leave := en.d.listen(q)
		held, next, rev, err := en.countDown(ctx, mine, before, readRev, wch, tick.C)
		leave()
		if err != nil || held {
			return err
		}
		before, readRev = next, rev
	}
}

// countDown waits on one watch of en's queue, whose entries before en's
// were before as read at readRev. It reports held once en holds the key,
// or returns the entries before it, read at rev, once the watch broke.
func (en *entry) countDown(ctx context.Context, mine int64, before []*mvccpb.KeyValue, readRev int64,
	wch clientv3.WatchChan, tick <-chan time.Time) (held bool, _ []*mvccpb.KeyValue, rev int64, _ error) {
	c := en.countOff(before, func(*mvccpb.KeyValue) bool { return true }, // any holder's release may admit it
		func(left []*mvccpb.KeyValue) bool { return limitBlocker(left, en.r.Limit) == nil })
	for {
		h, err := en.hear(ctx, readRev, wch, tick, c.gone)
		if err != nil {
			return false, nil, 0, err
		}
		if readRev == mine && c.holds(h) { // no read since the creating txn's (waitTurn)
			return true, nil, 0, nil
		}
		l, err := en.lookBack(ctx, mine, h.at)
		switch {
		case err != nil:
			return false, nil, 0, err
		case limitBlocker(l.before, en.r.Limit) == nil:
			en.granted(l.off)
			return true, nil, 0, nil
		case h.broken:
			return false, l.before, l.rev, nil
		}
		c.left, readRev = l.before, l.rev // this watch covers everything after rev
	}
}
