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
func (d *etcdDriver) Status(ctx context.Context, _ driver.Space, key string) (driver.LockInfo, error) {
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
	resp, err := d.client.Get(rctx, from, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, d.fail(ctx, key, err)
	}
	var list []driver.LockInfo
	at := map[string]int{} // a key's index in list
	expiries := map[int64]time.Time{}
	for _, kv := range resp.Kvs { // oldest first: a key's first entry holds it
		key, ok := splitEntry(d.prefix, string(kv.Key))
		switch i, seen := at[key]; {
		case !ok:
		case seen:
			list[i].Waiters++
		default:
			at[key] = len(list)
			list = append(list, d.info(rctx, key, kv, expiries))
		}
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
func (d *etcdDriver) ForceUnlock(ctx context.Context, _ driver.Space, key string) error {
	first := clientv3.OpGet(d.queue(key), append(clientv3.WithFirstCreate(), clientv3.WithPrefix(), clientv3.WithKeysOnly())...)
	for {
		resp, err := d.txn(ctx, key, nil, []clientv3.Op{first})
		if err != nil || len(kvs(resp, 0)) == 0 {
			return cmp.Or(err, locker.ErrNotHeld)
		}
		// Entry names are random, never reused: deleting by name is safe.
		del, err := d.txn(ctx, key, nil, []clientv3.Op{clientv3.OpDelete(string(kvs(resp, 0)[0].Key))})
		if err != nil || del.Responses[0].GetResponseDeleteRange().Deleted > 0 {
			return err
		}
		// It went meanwhile: force the next holder's.
	}
}
