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

// entry is the queue entry of call r, a holder or a waiter, whose hold
// set has r.ID; it is r.State, for Abandon, from the moment it may exist.
type entry struct {
	d     *etcdDriver
	r     *driver.Request
	name  string // the etcd key: prefix + escape(key) + "/" + random
	lease *etcdLease
}

// Acquire takes r.Key (see the package doc); an entry lost on the way is
// replaced.
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
	en := &entry{d: d, r: r, name: q + rand.Text(), lease: el}
	r.State = en
	put := clientv3.OpPut(en.name, record{Owner: r.Owner, Holds: []string{r.ID}}.encode(), clientv3.WithLease(el.id))
	if !r.Wait || r.Reentrant {
		// Only into an empty queue; else learn the holder, for re-entry.
		resp, err := en.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(q), "=", 0).WithPrefix()},
			[]clientv3.Op{put}, clientv3.OpGet(q, append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...))
		if err != nil {
			return driver.Grant{}, err
		}
		if resp.Succeeded {
			return en.take(ctx, resp.Header.Revision, start)
		}
		if first := kvs(resp, 0); r.Reentrant && len(first) == 1 {
			if rec, err := decodeRecord(first[0].Value); err == nil && rec.Owner == r.Owner {
				en.discard(ctx) // a dedicated lease we turn out not to need
				return d.reenter(ctx, r, first[0], rec)
			}
		}
		if !r.Wait {
			en.discard(ctx)
			return driver.Grant{}, nil
		}
	}
	// Queue up, learning the last entry before mine in the same txn.
	resp, err := en.txn(ctx, nil, []clientv3.Op{
		clientv3.OpGet(q, append(clientv3.WithLastCreate(), clientv3.WithPrefix(), clientv3.WithKeysOnly())...),
		put,
	})
	if err != nil {
		return driver.Grant{}, err
	}
	mine := resp.Header.Revision
	if pred := kvs(resp, 0); len(pred) > 0 {
		if err := en.waitTurn(ctx, mine, pred[0]); err != nil {
			return driver.Grant{}, err
		}
		start = time.Now()
	}
	return en.take(ctx, mine, start)
}

// txn runs the txn that may create en's entry. etcd refuses it, writing
// nothing, if en's etcd lease is gone: then it is errRequeue.
func (en *entry) txn(ctx context.Context, cmp []clientv3.Cmp, then []clientv3.Op, els ...clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := en.d.txn(ctx, en.r.Key, cmp, then, els...)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		en.lease.gone()
		return nil, errRequeue
	}
	return resp, err
}

// take grants the key to en, now the lowest entry, with create revision
// fence. The etcd lease is first made known to outlive the lease's first
// deadline by a good margin, and the validity is never longer than that.
func (en *entry) take(ctx context.Context, fence int64, start time.Time) (driver.Grant, error) {
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
		Hold: &hold{entry: en, fence: fence}, Fence: uint64(fence),
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
		return driver.Grant{}, err
	}
	return en.take(ctx, kv.CreateRevision, start)
}

// discard drops a dedicated lease granted for an entry that was not created.
func (en *entry) discard(ctx context.Context) {
	if en.lease.dedicated {
		en.lease.revoke(context.WithoutCancel(ctx))
	}
}

// undo drops en's hold, which a failed call may or may not have added,
// or leaves it to the sweep.
func (en *entry) undo(ctx context.Context) {
	if err := en.drop(ctx); err != nil && !errors.Is(err, locker.ErrNotHeld) {
		en.d.orphan(en)
	}
}

// drop removes en's hold from its entry, whatever the entry's fence.
func (en *entry) drop(ctx context.Context) error {
	return en.d.dropHold(ctx, en.r.Key, en.name, en.r.Owner, en.r.ID, 0)
}
