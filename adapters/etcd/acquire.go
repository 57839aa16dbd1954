package etcd

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/lease"
)

// errRequeue: this attempt's entry is gone (its etcd lease lapsed, or the
// holder it re-entered changed); start over with a new entry.
var errRequeue = errors.New("locker/etcd: queue entry lost; retrying")

// Lock implements locker.Locker: it queues an entry and waits for the
// deletion of its immediate predecessor only.
func (l *Locker) Lock(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return l.acquire(ctx, key, false, opts)
}

// TryLock implements locker.Locker: one txn creates the entry only if the
// key's queue is empty, so a refused attempt leaves nothing behind.
func (l *Locker) TryLock(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return l.acquire(ctx, key, true, opts)
}

func (l *Locker) acquire(ctx context.Context, key string, try bool, opts []locker.Option) (locker.Lease, error) {
	ctx, o, end, err := l.set.Begin(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	defer end()
	for {
		lease, err := l.attempt(ctx, key, o, try)
		if !errors.Is(err, errRequeue) {
			return lease, err
		}
		if err := ctx.Err(); err != nil {
			return nil, l.fail(ctx, key, err)
		}
	}
}

// entry is one queue entry of this Locker: a holder or a waiter.
type entry struct {
	l      *Locker
	key    string // the user's key
	name   string // the etcd key: prefix + escape(key) + "/" + random
	owner  string
	holdID string // this lease's id in the entry's hold set
	ttl    time.Duration
	keep   bool
	lease  *etcdLease
}

func (l *Locker) attempt(ctx context.Context, key string, o locker.Options, try bool) (locker.Lease, error) {
	start := time.Now() // a dedicated lease's TTL runs from its Grant, after this
	el, err := l.leaseFor(ctx, o.TTL, o.KeepAlive)
	if err != nil {
		return nil, l.fail(ctx, key, err)
	}
	q := l.queue(key)
	en := &entry{l: l, key: key, name: q + rand.Text(), owner: o.Owner, holdID: rand.Text(), ttl: o.TTL, keep: o.KeepAlive, lease: el}
	put := clientv3.OpPut(en.name, record{Owner: o.Owner, Holds: []string{en.holdID}}.encode(), clientv3.WithLease(el.id))

	if try || o.StableOwner {
		// Only into an empty queue; else learn the holder, for re-entry.
		resp, err := en.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(q), "=", 0).WithPrefix()},
			[]clientv3.Op{put}, []clientv3.Op{clientv3.OpGet(q, append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...)})
		if err != nil {
			return nil, err
		}
		if resp.Succeeded {
			return en.hold(ctx, resp.Header.Revision, start)
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if o.StableOwner && len(kvs) == 1 {
			if rec, err := decodeRecord(kvs[0].Value); err == nil && rec.Owner == o.Owner {
				en.discard(ctx) // a dedicated lease we turn out not to need
				return l.reenter(ctx, key, o, kvs[0], rec)
			}
		}
		if try {
			en.discard(ctx)
			return nil, locker.ErrLocked
		}
	}

	// Queue up, learning the last entry before mine in the same txn.
	resp, err := en.txn(ctx, nil, []clientv3.Op{
		clientv3.OpGet(q, append(clientv3.WithLastCreate(), clientv3.WithPrefix(), clientv3.WithKeysOnly())...),
		put,
	}, nil)
	if err != nil {
		return nil, err
	}
	mine := resp.Header.Revision
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return en.hold(ctx, mine, start)
	}
	if err := en.waitTurn(ctx, mine, kvs[0]); err != nil {
		if !errors.Is(err, errRequeue) {
			en.abandon(ctx)
		}
		return nil, err
	}
	return en.hold(ctx, mine, time.Now())
}

// txn runs the txn that may create en's entry. On a failure that leaves it
// unknown whether the entry was created, the entry is deleted (or left to
// the background sweep), so that it cannot block the key.
func (en *entry) txn(ctx context.Context, cmp []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	rctx, cancel := en.l.rpc(ctx)
	defer cancel()
	resp, err := en.l.client.Txn(rctx).If(cmp...).Then(then...).Else(els...).Commit()
	switch {
	case err == nil:
		return resp, nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound): // refused: nothing was written
		if !en.lease.dedicated {
			en.l.forget(en.lease)
		}
		return nil, errRequeue
	}
	en.abandon(ctx)
	return nil, en.l.fail(ctx, en.key, err)
}

// hold turns en, now the lowest entry with create revision fence, into a
// Lease. The etcd lease is first made known to outlive the lease's first
// deadline by a good margin, and Deadline is never later than that.
func (en *entry) hold(ctx context.Context, fence int64, start time.Time) (locker.Lease, error) {
	need := en.ttl * 2 / 3
	if !en.keep {
		need = en.ttl // nobody will renew it: give it its whole TTL
	}
	if en.lease.expires().Sub(start) >= need {
		return en.newLease(fence, start)
	}
	if err := en.lease.ensure(ctx, need); err != nil {
		if errors.Is(err, errLeaseGone) {
			return nil, errRequeue
		}
		en.abandon(ctx)
		return nil, en.l.fail(ctx, en.key, err)
	}
	return en.newLease(fence, start)
}

func (en *entry) newLease(fence int64, start time.Time) (locker.Lease, error) {
	ops := &holdOps{l: en.l, key: en.key, name: en.name, owner: en.owner, hold: en.holdID, fence: fence, ttl: en.ttl, lease: en.lease}
	return lease.New(en.l.set, lease.Config{
		Key: en.key, Owner: en.owner, Fence: uint64(fence), TTL: en.ttl, KeepAlive: en.keep,
		Start: start, Validity: min(en.ttl, en.lease.expires().Sub(start)), Ops: ops,
	})
}

// reenter adds a hold of its own to the entry kv of the same owner,
// keeping its fence. The write is guarded by the entry's mod revision. If
// it fails, the hold it may have added is taken back (or left to the
// background sweep), so that it cannot outlive the failed call.
func (l *Locker) reenter(ctx context.Context, key string, o locker.Options, kv *mvccpb.KeyValue, rec record) (locker.Lease, error) {
	start := time.Now()
	// The entry stays on its own etcd lease, possibly another Locker's.
	el := l.sharedByID(clientv3.LeaseID(kv.Lease))
	if el == nil {
		el = &etcdLease{l: l, id: clientv3.LeaseID(kv.Lease)}
	}
	en := &entry{l: l, key: key, name: string(kv.Key), owner: o.Owner, holdID: rand.Text(), ttl: o.TTL, keep: o.KeepAlive, lease: el}
	if err := l.addHold(ctx, key, en.name, kv.ModRevision, rec, en.holdID); err != nil {
		if !errors.Is(err, errRequeue) { // refused: nothing was written
			en.undo(ctx)
		}
		return nil, err
	}
	if err := en.lease.ensure(ctx, en.ttl*2/3); err != nil {
		en.undo(ctx)
		if errors.Is(err, errLeaseGone) {
			return nil, errRequeue
		}
		return nil, l.fail(ctx, key, err)
	}
	return en.newLease(kv.CreateRevision, start)
}

func (l *Locker) sharedByID(id clientv3.LeaseID) *etcdLease {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.shared {
		if e.id == id {
			return e
		}
	}
	return nil
}

// discard drops a dedicated lease granted for an entry that was not created.
func (en *entry) discard(ctx context.Context) {
	if en.lease.dedicated {
		en.lease.revoke(context.WithoutCancel(ctx))
	}
}

// abandon drops en's hold, and so its entry, in a ctx of its own since the
// caller's may have ended.
func (en *entry) abandon(ctx context.Context) {
	if en.lease.dedicated {
		en.lease.revoke(context.WithoutCancel(ctx)) // takes the entry with it
	}
	en.undo(ctx)
}

// undo drops en's hold, which a failed call may or may not have added, in
// a ctx of its own. If that fails too, the background sweep retries it.
func (en *entry) undo(ctx context.Context) {
	err := en.l.dropHold(context.WithoutCancel(ctx), en.key, en.name, en.owner, en.holdID, 0)
	if err != nil && !errors.Is(err, locker.ErrNotHeld) {
		en.l.orphan(en.key, en.name, en.owner, en.holdID)
	}
}
