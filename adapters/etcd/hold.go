package etcd

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// hold is one granted hold (driver.Hold, driver.Expirer): its entry, with
// the create revision fence as the proof of ownership, and the call's id
// in the entry's hold set.
type hold struct {
	*entry
	fence int64

	// unsure: a Release failed after its write may have applied, so a hold
	// found gone on the next try is taken as released by that write.
	unsure atomic.Bool
}

var _ driver.Expirer = (*hold)(nil)

// Refresh keeps the etcd lease alive (one keep-alive, shared by the
// concurrent refreshes of locks on the same lease) and checks that the
// entry is still ours: ForceUnlock deletes the entry, not the (shared) etcd
// lease, so this check is how the holder learns of it, within TTL/3.
func (h *hold) Refresh(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if err := h.lease.ensure(ctx, h.ttl); errors.Is(err, errLeaseGone) {
		return 0, locker.ErrNotHeld
	} else if err != nil {
		return 0, h.d.fail(ctx, h.key, err)
	}
	rctx, cancel := h.d.rpc(ctx)
	resp, err := h.d.client.Get(rctx, h.name)
	cancel()
	if err != nil {
		return 0, h.d.fail(ctx, h.key, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != h.fence || resp.Kvs[0].Lease != int64(h.lease.id) {
		return 0, locker.ErrNotHeld
	}
	if rec, err := decodeRecord(resp.Kvs[0].Value); err != nil || !rec.has(h.id) {
		return 0, locker.ErrNotHeld
	}
	return min(h.ttl, h.lease.expires().Sub(start)), nil
}

// Release drops this hold; the entry goes with its last hold. It can be
// repeated after a failure (a retried Unlock): the drop applies once, and
// a hold found gone after a failed try counts as released.
func (h *hold) Release(ctx context.Context) error {
	err := h.d.dropHold(ctx, h.key, h.name, h.owner, h.id, h.fence)
	switch {
	case errors.Is(err, locker.ErrNotHeld) && h.unsure.Load():
		err = nil // the earlier try's write did apply
	case err != nil && !errors.Is(err, locker.ErrNotHeld):
		h.unsure.Store(true)
		return err
	}
	if err == nil && h.lease.dedicated {
		h.lease.revoke(ctx)
	}
	return err
}

// Expire frees the key as soon as the lease ends unrenewed, rather than
// when etcd's lease (whole seconds, at least its minimum TTL) runs out. A
// hold it cannot drop now is left to the background sweep, as nobody else
// will: on another Locker's entry (re-entry), it would outlive this lease.
func (h *hold) Expire(ctx context.Context) {
	err := h.Release(ctx)
	if err != nil && !errors.Is(err, locker.ErrNotHeld) {
		h.d.orphan(h.entry)
	}
	if err != nil && h.lease.dedicated {
		h.lease.revoke(ctx)
	}
}

// addHold adds hold to the entry name of owner, whose value was read at
// mod revision rev as rec. It is idempotent: a hold already there is not
// added again. It returns errRequeue if the entry changed since the read.
func (d *etcdDriver) addHold(ctx context.Context, key, name string, rev int64, rec record, hold string) error {
	if rec.has(hold) {
		return nil
	}
	rctx, cancel := d.rpc(ctx)
	defer cancel()
	resp, err := d.client.Txn(rctx).
		If(clientv3.Compare(clientv3.ModRevision(name), "=", rev)).
		Then(clientv3.OpPut(name, rec.with(hold).encode(), clientv3.WithIgnoreLease())).Commit()
	if err != nil {
		return d.fail(ctx, key, err)
	}
	if !resp.Succeeded {
		return errRequeue
	}
	return nil
}

// dropHold removes hold from the entry name of owner (with create revision
// fence, if fence > 0), deleting the entry with its last hold. It is
// idempotent: it returns ErrNotHeld, changing nothing, if the hold or the
// entry is gone. The common case, a single hold, is one txn: delete if the
// value is exactly ours, else read it; an extra hold then comes off in a
// txn guarded by the mod revision read.
func (d *etcdDriver) dropHold(ctx context.Context, key, name, owner, hold string, fence int64) error {
	cmp := []clientv3.Cmp{clientv3.Compare(clientv3.Value(name), "=", record{Owner: owner, Holds: []string{hold}}.encode())}
	if fence > 0 {
		cmp = append(cmp, clientv3.Compare(clientv3.CreateRevision(name), "=", fence))
	}
	for {
		rctx, cancel := d.rpc(ctx)
		resp, err := d.client.Txn(rctx).If(cmp...).Then(clientv3.OpDelete(name)).Else(clientv3.OpGet(name)).Commit()
		cancel()
		if err != nil {
			return d.fail(ctx, key, err)
		}
		if resp.Succeeded {
			return nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 || (fence > 0 && kvs[0].CreateRevision != fence) {
			return locker.ErrNotHeld
		}
		rec, err := decodeRecord(kvs[0].Value)
		if err != nil || rec.Owner != owner || !rec.has(hold) {
			return locker.ErrNotHeld
		}
		rec = rec.without(hold)
		op := clientv3.OpDelete(name)
		if len(rec.Holds) > 0 {
			op = clientv3.OpPut(name, rec.encode(), clientv3.WithIgnoreLease())
		}
		rctx, cancel = d.rpc(ctx)
		resp, err = d.client.Txn(rctx).
			If(clientv3.Compare(clientv3.ModRevision(name), "=", kvs[0].ModRevision)).
			Then(op).Commit()
		cancel()
		if err != nil {
			return d.fail(ctx, key, err)
		}
		if resp.Succeeded {
			return nil
		}
	}
}
