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
	"github.com/locker-go/locker/driver"
)

// errRequeue: this attempt's entry is gone (its etcd lease lapsed, or the
// holder it re-entered changed); start over with a new entry.
var errRequeue = errors.New("locker/etcd: queue entry lost; retrying")

// entry is one queue entry of this driver, a holder or a waiter; it is a
// call's r.State, for Abandon, from the moment it may exist.
type entry struct {
	d     *etcdDriver
	key   string // the user's key
	name  string // the etcd key: prefix + escape(key) + "/" + random
	owner string
	id    string // this call's id in the entry's hold set
	ttl   time.Duration
	keep  bool
	lease *etcdLease
}

// Acquire takes r.Key. TryLock (r.Wait false) creates its entry only if
// the key's queue is empty, so a refusal leaves nothing behind. Lock
// queues an entry and blocks until it is the lowest, watching only its
// immediate predecessor. An entry lost on the way is replaced.
func (d *etcdDriver) Acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
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
	q := d.queue(r.Key)
	en := &entry{d: d, key: r.Key, name: q + rand.Text(), owner: r.Owner, id: r.ID, ttl: r.TTL, keep: r.KeepAlive, lease: el}
	r.State = en
	put := clientv3.OpPut(en.name, record{Owner: r.Owner, Holds: []string{en.id}}.encode(), clientv3.WithLease(el.id))
	if !r.Wait || r.Reentrant {
		// Only into an empty queue; else learn the holder, for re-entry.
		resp, err := en.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(q), "=", 0).WithPrefix()},
			[]clientv3.Op{put}, []clientv3.Op{clientv3.OpGet(q, append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...)})
		if err != nil {
			return driver.Grant{}, err
		}
		if resp.Succeeded {
			return en.take(ctx, resp.Header.Revision, start)
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if r.Reentrant && len(kvs) == 1 {
			if rec, err := decodeRecord(kvs[0].Value); err == nil && rec.Owner == r.Owner {
				en.discard(ctx) // a dedicated lease we turn out not to need
				return d.reenter(ctx, r, kvs[0], rec)
			}
		}
		if !r.Wait {
			en.discard(ctx)
			r.State = nil
			return driver.Grant{}, nil
		}
	}
	// Queue up, learning the last entry before mine in the same txn.
	resp, err := en.txn(ctx, nil, []clientv3.Op{
		clientv3.OpGet(q, append(clientv3.WithLastCreate(), clientv3.WithPrefix(), clientv3.WithKeysOnly())...),
		put,
	}, nil)
	if err != nil {
		return driver.Grant{}, err
	}
	mine := resp.Header.Revision
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		if err := en.waitTurn(ctx, mine, kvs[0]); err != nil {
			return driver.Grant{}, err
		}
		start = time.Now()
	}
	return en.take(ctx, mine, start)
}

// txn runs the txn that may create en's entry. etcd refuses it, writing
// nothing, if en's etcd lease is gone: then it is errRequeue.
func (en *entry) txn(ctx context.Context, cmp []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	rctx, cancel := en.d.rpc(ctx)
	defer cancel()
	resp, err := en.d.client.Txn(rctx).If(cmp...).Then(then...).Else(els...).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		if !en.lease.dedicated {
			en.d.forget(en.lease)
		}
		return nil, errRequeue
	}
	return resp, en.d.fail(ctx, en.key, err)
}

// take grants the key to en, now the lowest entry, with create revision
// fence. The etcd lease is first made known to outlive the lease's first
// deadline by a good margin, and the validity is never longer than that.
func (en *entry) take(ctx context.Context, fence int64, start time.Time) (driver.Grant, error) {
	need := en.ttl * 2 / 3
	if !en.keep {
		need = en.ttl // nobody will renew it: give it its whole TTL
	}
	if en.lease.expires().Sub(start) < need {
		if err := en.lease.ensure(ctx, need); errors.Is(err, errLeaseGone) {
			return driver.Grant{}, errRequeue
		} else if err != nil {
			return driver.Grant{}, en.d.fail(ctx, en.key, err)
		}
	}
	return en.grant(fence, start), nil
}

func (en *entry) grant(fence int64, start time.Time) driver.Grant {
	return driver.Grant{
		Hold: &hold{entry: en, fence: fence}, Fence: uint64(fence),
		Start: start, Validity: min(en.ttl, en.lease.expires().Sub(start)),
	}
}

// reenter adds the call's hold to the entry kv of the same owner, keeping
// its fence. The write is guarded by the entry's mod revision.
func (d *etcdDriver) reenter(ctx context.Context, r *driver.Request, kv *mvccpb.KeyValue, rec record) (driver.Grant, error) {
	start := time.Now()
	// The entry stays on its own etcd lease, possibly another Locker's.
	el := d.sharedByID(clientv3.LeaseID(kv.Lease))
	if el == nil {
		el = &etcdLease{d: d, id: clientv3.LeaseID(kv.Lease)}
	}
	en := &entry{d: d, key: r.Key, name: string(kv.Key), owner: r.Owner, id: r.ID, ttl: r.TTL, keep: r.KeepAlive, lease: el}
	r.State = en
	if err := d.addHold(ctx, r.Key, en.name, kv.ModRevision, rec, en.id); err != nil {
		return driver.Grant{}, err
	}
	if err := en.lease.ensure(ctx, en.ttl*2/3); err != nil {
		if errors.Is(err, errLeaseGone) {
			en.undo(context.WithoutCancel(ctx))
			return driver.Grant{}, errRequeue
		}
		return driver.Grant{}, d.fail(ctx, r.Key, err)
	}
	return en.grant(kv.CreateRevision, start), nil
}

// discard drops a dedicated lease granted for an entry that was not created.
func (en *entry) discard(ctx context.Context) {
	if en.lease.dedicated {
		en.lease.revoke(context.WithoutCancel(ctx))
	}
}

// undo drops en's hold, which a failed call may or may not have added.
// If that fails too, the background sweep retries it: the entry sits on an
// etcd lease that other locks keep alive.
func (en *entry) undo(ctx context.Context) {
	err := en.d.dropHold(ctx, en.key, en.name, en.owner, en.id, 0)
	if err != nil && !errors.Is(err, locker.ErrNotHeld) {
		en.d.orphan(en)
	}
}
