package etcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// errRequeue: this attempt's entry is gone (its etcd lease lapsed, or the
// holder it re-entered changed); start over with a new entry.
var errRequeue = errors.New("locker/etcd: queue entry lost; retrying")

// entry is the queue entry of call r, a holder or a waiter, whose hold
// set has r.ID; it is r.State, for Abandon, from the moment it may exist.
type entry struct {
	d     *etcdDriver
	r     *driver.Request
	name  string // the etcd key: prefix + escape(key) + "/" + random
	lease *etcdLease
	// offset is the fence offset read as the entry was granted, recorded
	// the one its record has (floor.go).
	offset, recorded int64
	ahead            int64 // the entries before it as it queued
	// mayLand: a txn that writes it (or a re-entry's hold in it) failed
	// with no answer (cut off, timed out), so it may land later, after
	// Abandon found nothing.
	mayLand    bool
	strayUntil time.Time // the sweep looks for it until then
}

// Acquire takes r.Key (see the package doc); an entry lost on the way is
// replaced.
func (d *etcdDriver) Acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	if err := checkTTL(r); err != nil {
		return driver.Grant{}, err
	}
	if err := d.raiseFor(ctx, r); err != nil {
		return driver.Grant{}, err
	}
	for {
		g, err := d.attempt(ctx, r)
		if !errors.Is(err, errRequeue) {
			return g, err
		}
		r.State = nil // that entry is gone: nothing to abandon
		if err := ctx.Err(); err != nil {
			return driver.Grant{}, err
		}
	}
}

// Abandon drops the entry, or the re-entry's hold, that a failed call may
// have left; if that fails too, the background sweep retries it.
func (d *etcdDriver) Abandon(ctx context.Context, r *driver.Request) {
	if en, ok := r.State.(*entry); ok {
		en.discard(ctx) // a dedicated lease takes the entry with it
		en.undo(ctx)
	}
}

// attempt tries once with a new entry; errRequeue if that entry is lost.
func (d *etcdDriver) attempt(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	start := time.Now() // a dedicated lease's TTL runs from its Grant, after this
	el, err := d.leaseFor(ctx, r.TTL, r.KeepAlive)
	if err != nil {
		return driver.Grant{}, d.fail(ctx, r.Key, err)
	}
	q := d.queue(r.Space, r.Key)
	en := &entry{d: d, r: r, name: d.names.take(q), lease: el}
	r.State = en
	put := clientv3.OpPut(en.name, en.record().encode(), clientv3.WithLease(el.id))
	// A Lock queues at once, in every mode: readers that came together
	// would otherwise each read the queue, then fail to put their entry
	// because another reader's came first (tryFirst), and start over.
	if !r.Wait || r.Reentrant {
		if g, done, err := en.tryFirst(ctx, q, put, start); done || err != nil {
			return g, err
		}
	}
	// Queue up, learning the entries before mine in the same txn.
	before := clientv3.OpGet(q, en.readBefore()...)
	resp, err := en.txn(ctx, []clientv3.Cmp{en.unused()}, []clientv3.Op{before, put, d.getFloor(r.Space, r.Key)})
	if err != nil {
		return driver.Grant{}, err
	}
	if !resp.Succeeded { // the name is not free after all (names.go): start over with another
		en.discard(ctx)
		return driver.Grant{}, errRequeue
	}
	mine := resp.Header.Revision
	en.ahead = resp.Responses[0].GetResponseRange().Count
	en.granted(floorIn(resp, 2))
	if waited, err := en.queued(ctx, mine, byCreation(kvs(resp, 0))); err != nil {
		return driver.Grant{}, err
	} else if waited {
		start = time.Now()
		if !driver.Leaf(r.Space, r.Key) {
			fence, err := en.refence(ctx, mine)
			if err != nil {
				return driver.Grant{}, err
			}
			return en.take(ctx, mine, fence, start)
		}
	}
	return en.take(ctx, mine, mine, start)
}

// queued follows the txn that queued en's entry (create revision mine)
// behind before: a mismatch (rule 2) removes the entry again; else it
// waits, if it must, until the entry holds the key. waited reports
// whether it did.
func (en *entry) queued(ctx context.Context, mine int64, before []*mvccpb.KeyValue) (waited bool, err error) {
	if err := en.mismatched(ctx, mine, before); err != nil {
		en.discard(ctx) // a dedicated lease takes the entry with it
		en.undo(ctx)
		en.r.State = nil // nothing left to abandon
		return false, err
	}
	pred := waitFor(before, en.r)
	switch {
	case pred == nil:
		return false, nil
	case en.r.Mode == driver.Limited:
		return true, en.waitLimit(ctx, mine, before)
	}
	return true, en.waitTurn(ctx, mine, before)
}

// refence gives a subtree node granted after a wait a fence drawn now,
// and records it in its entry for a re-entry to find: its create revision
// may be below the fence of a lock taken below it meanwhile (a subtree
// lock's path is taken after its ancestors, and one of them may have
// queued behind this node), as nowhere else, since every entry of a key
// its mode excludes is granted in revision order. errRequeue if the entry
// is gone.
func (en *entry) refence(ctx context.Context, created int64) (int64, error) {
	key, name := en.r.Key, en.name
	for {
		resp, err := en.d.txn(ctx, key, nil, []clientv3.Op{clientv3.OpGet(name), en.d.getFloor(en.r.Space, key)})
		if err != nil {
			return 0, err
		}
		kv := kvs(resp, 0)
		if len(kv) == 0 || kv[0].CreateRevision != created {
			return 0, errRequeue
		}
		rec, err := decodeRecord(kv[0].Value)
		if err != nil {
			return 0, errRequeue
		}
		en.granted(floorIn(resp, 1))
		rec.Offset = en.offset
		// The fence is a write's revision: above every write before it,
		// the releases that let this node go included.
		touch, err := en.d.txn(ctx, key, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(name), "=", kv[0].ModRevision)},
			[]clientv3.Op{clientv3.OpPut(name, rec.encode(), clientv3.WithIgnoreLease())})
		if err != nil {
			return 0, err
		}
		if !touch.Succeeded {
			continue // a re-entry changed it meanwhile
		}
		rec.Fence = touch.Header.Revision
		if ok, err := en.d.rewrite(ctx, key, name, rec.Fence, rec); ok || err != nil {
			en.recorded = en.offset
			return rec.Fence, err
		}
	}
}

// waitFor is the entry among before (the entries before a call's, all
// of them, or the last for an Exclusive call) to wait for: the last that
// r's mode excludes (Limited: see limitBlocker); nil if the call holds
// the key.
func waitFor(before []*mvccpb.KeyValue, r *driver.Request) *mvccpb.KeyValue {
	switch r.Mode {
	case driver.Exclusive:
		if len(before) == 0 {
			return nil
		}
		return before[len(before)-1]
	case driver.Limited:
		return limitBlocker(before, r.Limit)
	}
	return lastIncompatible(before, r.Mode)
}

// tryFirst is the attempt of a call that may not queue: a TryLock, or a
// WithOwner call (a re-entry waits for nobody). Its entry goes in at once
// into an empty queue, or one whose
// every entry admits it (unless an entry came meanwhile: then it starts
// over); a re-entry joins its owner's holder; a mismatch (rule 2) writes
// nothing. done is false if the call is to queue.
func (en *entry) tryFirst(ctx context.Context, q string, put clientv3.Op, start time.Time) (g driver.Grant, done bool, err error) {
	r := en.r
	get := clientv3.OpGet(q, append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...)
	if r.Reentrant || r.Mode != driver.Exclusive {
		get = clientv3.OpGet(q, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	}
	resp, err := en.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(q), "=", 0).WithPrefix()},
		[]clientv3.Op{put, en.d.getFloor(r.Space, r.Key)}, get)
	if err != nil {
		return driver.Grant{}, true, err
	}
	if resp.Succeeded {
		en.granted(floorIn(resp, 1))
		g, err = en.take(ctx, resp.Header.Revision, resp.Header.Revision, start)
		return g, true, err
	}
	entries := kvs(resp, 0)
	if r.Reentrant {
		if g, done, err := en.reentry(ctx, entries); done {
			return g, true, err
		}
	}
	if len(entries) > 0 {
		if err := mismatch(r, entries[0]); err != nil {
			en.discard(ctx)
			return driver.Grant{}, true, err
		}
	}
	if r.Mode != driver.Exclusive && waitFor(entries, r) == nil {
		// Admitted behind every entry: in, unless one came since the read.
		since := clientv3.Compare(clientv3.CreateRevision(q), "<", resp.Header.Revision+1).WithPrefix()
		put, err := en.txn(ctx, []clientv3.Cmp{since, en.unused()}, []clientv3.Op{put, en.d.getFloor(r.Space, r.Key)})
		switch {
		case err != nil:
			return driver.Grant{}, true, err
		case put.Succeeded:
			en.granted(floorIn(put, 1))
			g, err = en.take(ctx, put.Header.Revision, put.Header.Revision, start)
			return g, true, err
		}
		en.discard(ctx)
		return driver.Grant{}, true, errRequeue
	}
	if !r.Wait {
		en.discard(ctx)
		return driver.Grant{}, true, nil
	}
	return driver.Grant{}, false, nil
}

// reentry is rule 1 (and the same owner's rule 2) for en's call, which
// found entries in its queue: done if the call's owner holds the key, in
// its mode (a re-entry, granted) or another (ErrModeMismatch).
func (en *entry) reentry(ctx context.Context, entries []*mvccpb.KeyValue) (driver.Grant, bool, error) {
	r := en.r
	for i, ok := range granted(entries) {
		rec, err := decodeRecord(entries[i].Value)
		if !ok || err != nil || rec.Owner != r.Owner {
			continue
		}
		en.discard(ctx) // a dedicated lease we turn out not to need
		if rec.Mode != r.Mode {
			return driver.Grant{}, true, fmt.Errorf("%w: owner %q holds %q as %v, asks for %v", locker.ErrModeMismatch, r.Owner, r.Key, rec.Mode, r.Mode)
		}
		g, err := en.d.reenter(ctx, r, entries[i], rec)
		return g, true, err
	}
	return driver.Grant{}, false, nil
}

// txn runs the txn that may create en's entry. etcd refuses it, writing
// nothing, if en's etcd lease is gone: then it is errRequeue.
func (en *entry) txn(ctx context.Context, cmp []clientv3.Cmp, then []clientv3.Op, els ...clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := en.d.txn(ctx, en.r.Key, cmp, then, els...)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		en.lease.gone()
		return nil, errRequeue
	}
	if err != nil {
		en.mayLand = true // it may land still
	}
	return resp, err
}

// take grants the key to en, now the lowest entry, with create revision
// fence. The etcd lease is first made known to outlive the lease's first
// deadline by a good margin, and the validity is never longer than that.
func (en *entry) take(ctx context.Context, created, fence int64, start time.Time) (driver.Grant, error) {
	if err := en.settle(ctx, created); err != nil {
		return driver.Grant{}, err
	}
	fence += en.offset
	need := en.r.TTL * 2 / 3
	if !en.r.KeepAlive {
		need = en.r.TTL // nobody will renew it: give it its whole TTL
	}
	if en.lease.expires().Sub(start) < need {
		// A lease gone takes the entry with it: nothing to undo.
		if err := en.lease.ensure(ctx, need); errors.Is(err, errLeaseGone) {
			return driver.Grant{}, errRequeue
		} else if err != nil {
			return driver.Grant{}, en.d.fail(ctx, en.r.Key, err)
		}
	}
	return driver.Grant{
		Hold: &hold{entry: en, created: created}, Fence: uint64(fence),
		Start: start, Validity: min(en.r.TTL, en.lease.expires().Sub(start)),
	}, nil
}

// reenter adds the call's hold to the entry kv of the same owner, keeping
// its fence. The write is guarded by the entry's mod revision.
func (d *etcdDriver) reenter(ctx context.Context, r *driver.Request, kv *mvccpb.KeyValue, rec record) (driver.Grant, error) {
	start := time.Now()
	// The entry stays on its etcd lease, possibly another Locker's: this
	// hold keeps it alive too.
	el := &etcdLease{d: d, id: clientv3.LeaseID(kv.Lease), turn: make(chan struct{}, 1)}
	en := &entry{d: d, r: r, name: string(kv.Key), lease: el}
	r.State = en
	if err := d.addHold(ctx, r.Key, en.name, kv.ModRevision, rec, r.ID); err != nil {
		en.mayLand = !errors.Is(err, errRequeue) // the hold may land still
		return driver.Grant{}, err
	}
	en.offset, en.recorded = rec.Offset, rec.Offset // the fence it was granted
	return en.take(ctx, kv.CreateRevision, cmp.Or(rec.Fence, kv.CreateRevision), start)
}

// unused is the condition of a txn that creates en's entry: no entry has
// its name (names.go), so a live one is never overwritten.
func (en *entry) unused() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(en.name), "=", 0)
}

// discard drops a dedicated lease granted for an entry that was not created.
func (en *entry) discard(ctx context.Context) {
	if en.lease.dedicated {
		en.lease.revoke(context.WithoutCancel(ctx))
	}
}

// undo drops en's hold, which a failed call may or may not have added,
// or leaves it to the sweep; as well one found missing whose creation may
// still land (mayLand), which the sweep looks for until strayWindow passed.
func (en *entry) undo(ctx context.Context) {
	err := en.drop(ctx)
	if errors.Is(err, locker.ErrNotHeld) && en.mayLand {
		en.strayUntil = time.Now().Add(strayWindow)
		en.d.orphan(en)
	} else if err != nil && !errors.Is(err, locker.ErrNotHeld) {
		en.d.orphan(en)
	}
}

// drop removes en's hold from its entry, whatever the entry's fence.
func (en *entry) drop(ctx context.Context) error {
	return en.d.dropHold(ctx, en.r.Key, en.name, recordOf(en.r, 0), en.r.ID, 0)
}
