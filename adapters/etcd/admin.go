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

// Status implements driver.Admin: the holders are the entries of key's
// queue that hold (every entry before each is compatible with it, or for
// a Limited one of n, Limited of its n and fewer than n), the Shared,
// Exclusive and Limited ones; the others are waiters.
func (d *etcdDriver) Status(ctx context.Context, space driver.Space, key string) (driver.LockInfo, error) {
	list, err := d.list(ctx, key, space, d.queue(space, key)) // holds key's entries only
	if err != nil || len(list) == 0 {
		return driver.LockInfo{}, cmp.Or(err, locker.ErrNotHeld)
	}
	return list[0], nil
}

// List implements driver.Admin, over both spaces.
func (d *etcdDriver) List(ctx context.Context, prefix string) ([]driver.LockInfo, error) {
	list, err := d.list(ctx, prefix, driver.Plain, d.prefix+escape(prefix))
	if err != nil {
		return nil, err
	}
	tree, err := d.list(ctx, prefix, driver.Subtree, d.spacePrefix(driver.Subtree)+escape(prefix))
	return append(list, tree...), err
}

// list describes the locks of space whose entries lie under the etcd
// prefix from.
func (d *etcdDriver) list(ctx context.Context, key string, space driver.Space, from string) ([]driver.LockInfo, error) {
	rctx, cancel := d.rpc(ctx)
	defer cancel()
	resp, err := d.client.Get(rctx, from, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, d.fail(ctx, key, err)
	}
	queues := map[string][]*mvccpb.KeyValue{}
	var keys []string
	for _, kv := range resp.Kvs { // oldest first
		k, sp, ok := splitEntry(d.prefix, string(kv.Key))
		if !ok || sp != space {
			continue
		}
		if queues[k] == nil {
			keys = append(keys, k)
		}
		queues[k] = append(queues[k], kv)
	}
	var list []driver.LockInfo
	expiries := map[int64]time.Time{}
	for _, k := range keys {
		if info, ok := d.info(rctx, k, space, queues[k], expiries); ok {
			list = append(list, info)
		}
	}
	return list, nil
}

// info describes key's queue: its Shared, Exclusive or Limited holders,
// each's Expires from its etcd lease's TTL; ok is false if none holds.
func (d *etcdDriver) info(ctx context.Context, key string, space driver.Space, queue []*mvccpb.KeyValue, expiries map[int64]time.Time) (driver.LockInfo, bool) {
	info := driver.LockInfo{Key: key, Space: space, Mode: driver.Shared}
	for i, ok := range granted(queue) {
		kv := queue[i]
		mode := modeOf(kv)
		switch {
		case !ok:
			info.Waiters++
			continue
		case mode.Intent():
			continue
		case mode == driver.Exclusive:
			info.Mode = driver.Exclusive
		case mode == driver.Limited:
			info.Mode, info.Limit = driver.Limited, slotOf(kv).limit
		}
		h := driver.Holder{Fence: uint64(kv.CreateRevision), Holds: 1, Expires: d.expiry(ctx, kv.Lease, expiries)}
		if rec, err := decodeRecord(kv.Value); err == nil {
			h.Owner, h.Holds, h.Fence = rec.Owner, max(1, len(rec.Holds)), uint64(fenceOf(kv.CreateRevision, rec))
		}
		info.Holders = append(info.Holders, h)
	}
	if len(info.Holders) == 0 {
		return info, false
	}
	first := info.Holders[0]
	info.Owner, info.Fence, info.Holds, info.Expires = first.Owner, first.Fence, first.Holds, first.Expires
	return info, true
}

// expiry is when etcd lease id runs out, as its TTL says now.
func (d *etcdDriver) expiry(ctx context.Context, id int64, expiries map[int64]time.Time) time.Time {
	exp, ok := expiries[id]
	if !ok && id != 0 {
		now := time.Now()
		if ttl, err := d.client.TimeToLive(ctx, clientv3.LeaseID(id)); err == nil && ttl.TTL >= 0 {
			exp = now.Add(time.Duration(ttl.TTL) * time.Second)
		}
		expiries[id] = exp
	}
	return exp
}

// ForceUnlock implements driver.Admin. It deletes the holders' entries
// (Shared, Exclusive and Limited; intention holders are no locks of their
// own), not their etcd leases (which may carry other locks); a holder's
// next refresh finds its entry gone and reports ErrLeaseLost, and the next
// waiter's watch fires at once.
func (d *etcdDriver) ForceUnlock(ctx context.Context, space driver.Space, key string) error {
	q := d.queue(space, key)
	all := clientv3.OpGet(q, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	for {
		resp, err := d.txn(ctx, key, nil, []clientv3.Op{all})
		if err != nil {
			return err
		}
		entries := kvs(resp, 0)
		var (
			same []clientv3.Cmp
			del  []clientv3.Op
		)
		for i, ok := range granted(entries) {
			if ok && !modeOf(entries[i]).Intent() {
				// Each as read: a name its Locker used again since is another entry.
				name := string(entries[i].Key)
				same = append(same, clientv3.Compare(clientv3.CreateRevision(name), "=", entries[i].CreateRevision))
				del = append(del, clientv3.OpDelete(name))
			}
		}
		if len(del) == 0 {
			return locker.ErrNotHeld
		}
		resp, err = d.txn(ctx, key, same, del)
		if err != nil {
			return err
		}
		if resp.Succeeded {
			return nil
		}
		// Some went meanwhile: force the holders now.
	}
}
