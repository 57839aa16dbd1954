package etcd

import (
	"cmp"
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// Status implements driver.Admin: the holder is the lowest entry of key's
// queue; the others are waiters.
func (d *etcdDriver) Status(ctx context.Context, key string) (driver.LockInfo, error) {
	list, err := d.list(ctx, key, d.queue(key)) // holds key's entries only
	if err != nil || len(list) == 0 {
		return driver.LockInfo{}, cmp.Or(err, locker.ErrNotHeld)
	}
	return list[0], nil
}

// List implements driver.Admin.
func (d *etcdDriver) List(ctx context.Context, prefix string) ([]driver.LockInfo, error) {
	return d.list(ctx, prefix, d.prefix+escape(prefix))
}

// list describes the locks whose entries lie under the etcd prefix from.
func (d *etcdDriver) list(ctx context.Context, key, from string) ([]driver.LockInfo, error) {
	rctx, cancel := d.rpc(ctx)
	defer cancel()
	resp, err := d.client.Get(rctx, from, clientv3.WithPrefix())
	if err != nil {
		return nil, d.fail(ctx, key, err)
	}
	holders := map[string]*mvccpb.KeyValue{}
	entries := map[string]int{}
	for _, kv := range resp.Kvs {
		key, ok := splitEntry(d.prefix, string(kv.Key))
		if !ok {
			continue
		}
		entries[key]++
		if h := holders[key]; h == nil || kv.CreateRevision < h.CreateRevision {
			holders[key] = kv
		}
	}
	expiries := map[int64]time.Time{}
	list := make([]driver.LockInfo, 0, len(holders))
	for key, kv := range holders {
		info := d.info(rctx, key, kv, expiries)
		info.Waiters = entries[key] - 1
		list = append(list, info)
	}
	return list, nil
}

// info describes a holder entry; Expires comes from its etcd lease's TTL.
func (d *etcdDriver) info(ctx context.Context, key string, kv *mvccpb.KeyValue, expiries map[int64]time.Time) driver.LockInfo {
	info := driver.LockInfo{Key: key, Fence: uint64(kv.CreateRevision), Holds: 1}
	if rec, err := decodeRecord(kv.Value); err == nil {
		info.Owner, info.Holds = rec.Owner, max(1, len(rec.Holds))
	}
	exp, ok := expiries[kv.Lease]
	if !ok && kv.Lease != 0 {
		now := time.Now()
		if ttl, err := d.client.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err == nil && ttl.TTL >= 0 {
			exp = now.Add(time.Duration(ttl.TTL) * time.Second)
		}
		expiries[kv.Lease] = exp
	}
	info.Expires = exp
	return info
}

// ForceUnlock implements driver.Admin. It deletes the holder's entry, not
// its etcd lease (which may carry other locks); the holder's next refresh
// finds the entry gone and reports ErrLeaseLost, and the next waiter's
// watch fires at once.
func (d *etcdDriver) ForceUnlock(ctx context.Context, key string) error {
	q := d.queue(key)
	for {
		rctx, cancel := d.rpc(ctx)
		resp, err := d.client.Get(rctx, q, append(clientv3.WithFirstCreate(), clientv3.WithPrefix(), clientv3.WithKeysOnly())...)
		if err != nil || len(resp.Kvs) == 0 {
			cancel()
			return cmp.Or(d.fail(ctx, key, err), locker.ErrNotHeld)
		}
		name := string(resp.Kvs[0].Key)
		del, err := d.client.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(name), "=", resp.Kvs[0].CreateRevision)).
			Then(clientv3.OpDelete(name)).Commit()
		cancel()
		if err != nil {
			return d.fail(ctx, key, err)
		}
		if del.Succeeded {
			return nil
		}
	}
}
