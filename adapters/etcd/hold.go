package etcd

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/lease"
)

// holdOps is the backend side of one held lease (lease.Ops, lease.Expirer):
// the entry name, with its create revision as the proof of ownership.
type holdOps struct {
	l     *Locker
	key   string
	name  string
	owner string
	fence int64
	ttl   time.Duration
	lease *etcdLease
}

var _ lease.Expirer = (*holdOps)(nil)

// Refresh keeps the etcd lease alive (one keep-alive, shared by the
// concurrent refreshes of locks on the same lease) and checks that the
// entry is still ours: ForceUnlock deletes the entry, not the (shared) etcd
// lease, so this check is how the holder learns of it, within TTL/3.
func (h *holdOps) Refresh(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if err := h.lease.ensure(ctx, h.ttl); err != nil {
		if errors.Is(err, errLeaseGone) {
			return 0, locker.ErrNotHeld
		}
		return 0, h.l.fail(ctx, h.key, err)
	}
	rctx, cancel := h.l.rpc(ctx)
	resp, err := h.l.client.Get(rctx, h.name)
	cancel()
	if err != nil {
		return 0, h.l.fail(ctx, h.key, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != h.fence || resp.Kvs[0].Lease != int64(h.lease.id) {
		return 0, locker.ErrNotHeld
	}
	return min(h.ttl, h.lease.expires().Sub(start)), nil
}

// Release drops one hold: the entry goes with its last hold, in one txn
// guarded by its create revision and value; an extra hold is taken off in
// a txn guarded by its mod revision.
func (h *holdOps) Release(ctx context.Context) error {
	one := record{Owner: h.owner, Holds: 1}.encode()
	for {
		rctx, cancel := h.l.rpc(ctx)
		resp, err := h.l.client.Txn(rctx).If(
			clientv3.Compare(clientv3.CreateRevision(h.name), "=", h.fence),
			clientv3.Compare(clientv3.Value(h.name), "=", one),
		).Then(clientv3.OpDelete(h.name)).Else(clientv3.OpGet(h.name)).Commit()
		cancel()
		if err != nil {
			return h.l.fail(ctx, h.key, err)
		}
		if resp.Succeeded {
			if h.lease.dedicated {
				h.lease.revoke(ctx)
			}
			return nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 || kvs[0].CreateRevision != h.fence {
			return locker.ErrNotHeld
		}
		rec, err := decodeRecord(kvs[0].Value)
		if err != nil || rec.Owner != h.owner {
			return locker.ErrNotHeld
		}
		op := clientv3.OpDelete(h.name)
		if rec.Holds > 1 {
			rec.Holds--
			op = clientv3.OpPut(h.name, rec.encode(), clientv3.WithIgnoreLease())
		}
		rctx, cancel = h.l.rpc(ctx)
		resp, err = h.l.client.Txn(rctx).
			If(clientv3.Compare(clientv3.ModRevision(h.name), "=", kvs[0].ModRevision)).
			Then(op).Commit()
		cancel()
		if err != nil {
			return h.l.fail(ctx, h.key, err)
		}
		if resp.Succeeded {
			return nil
		}
	}
}

// Expire frees the key as soon as the lease ends unrenewed, rather than
// when etcd's lease (whole seconds, at least its minimum TTL) runs out.
func (h *holdOps) Expire(ctx context.Context) {
	if err := h.Release(ctx); err != nil && h.lease.dedicated {
		h.lease.revoke(ctx)
	}
}
