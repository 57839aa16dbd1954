package etcd

import (
	"cmp"
	"context"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
)

// Status implements locker.Admin: the holder is the lowest entry of key's
// queue; the others are waiters.
func (l *Locker) Status(ctx context.Context, key string) (locker.LockInfo, error) {
	if err := l.set.CheckKey(key); err != nil {
		return locker.LockInfo{}, err
	}
	q := l.queue(key)
	rctx, cancel := l.rpc(ctx)
	defer cancel()
	resp, err := l.client.Txn(rctx).Then(
		clientv3.OpGet(q, append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...),
		clientv3.OpGet(q, clientv3.WithPrefix(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return locker.LockInfo{}, l.fail(ctx, key, err)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return locker.LockInfo{}, locker.ErrNotHeld
	}
	info := l.info(rctx, key, kvs[0], map[int64]time.Time{})
	info.Waiters = int(resp.Responses[1].GetResponseRange().Count) - 1
	return info, nil
}

// List implements locker.Admin.
func (l *Locker) List(ctx context.Context, prefix string) ([]locker.LockInfo, error) {
	if err := l.set.Check(); err != nil {
		return nil, err
	}
	rctx, cancel := l.rpc(ctx)
	defer cancel()
	resp, err := l.client.Get(rctx, l.prefix+escape(prefix), clientv3.WithPrefix())
	if err != nil {
		return nil, l.fail(ctx, prefix, err)
	}
	holders := map[string]*mvccpb.KeyValue{}
	entries := map[string]int{}
	for _, kv := range resp.Kvs {
		key, ok := splitEntry(l.prefix, string(kv.Key))
		if !ok {
			continue
		}
		entries[key]++
		if h := holders[key]; h == nil || kv.CreateRevision < h.CreateRevision {
			holders[key] = kv
		}
	}
	expiries := map[int64]time.Time{}
	list := make([]locker.LockInfo, 0, len(holders))
	for key, kv := range holders {
		info := l.info(rctx, key, kv, expiries)
		info.Waiters = entries[key] - 1
		list = append(list, info)
	}
	slices.SortFunc(list, func(a, b locker.LockInfo) int { return cmp.Compare(a.Key, b.Key) })
	return list, nil
}

// info describes a holder entry; Expires comes from its etcd lease's TTL.
func (l *Locker) info(ctx context.Context, key string, kv *mvccpb.KeyValue, expiries map[int64]time.Time) locker.LockInfo {
	info := locker.LockInfo{Key: key, Fence: uint64(kv.CreateRevision), Holds: 1}
	if rec, err := decodeRecord(kv.Value); err == nil {
		info.Owner, info.Holds = rec.Owner, max(1, len(rec.Holds))
	}
	exp, ok := expiries[kv.Lease]
	if !ok && kv.Lease != 0 {
		now := time.Now()
		if ttl, err := l.client.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err == nil && ttl.TTL >= 0 {
			exp = now.Add(time.Duration(ttl.TTL) * time.Second)
		}
		expiries[kv.Lease] = exp
	}
	info.Expires = exp
	return info
}

// ForceUnlock implements locker.Admin. It deletes the holder's entry, not
// its etcd lease (which may carry other locks); the holder's next refresh
// finds the entry gone and reports ErrLeaseLost, and the next waiter's
// watch fires at once.
func (l *Locker) ForceUnlock(ctx context.Context, key string) error {
	if err := l.set.CheckKey(key); err != nil {
		return err
	}
	q := l.queue(key)
	for {
		rctx, cancel := l.rpc(ctx)
		resp, err := l.client.Get(rctx, q, append(clientv3.WithFirstCreate(), clientv3.WithPrefix(), clientv3.WithKeysOnly())...)
		if err != nil {
			cancel()
			return l.fail(ctx, key, err)
		}
		if len(resp.Kvs) == 0 {
			cancel()
			return locker.ErrNotHeld
		}
		name := string(resp.Kvs[0].Key)
		del, err := l.client.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(name), "=", resp.Kvs[0].CreateRevision)).
			Then(clientv3.OpDelete(name)).Commit()
		cancel()
		if err != nil {
			return l.fail(ctx, key, err)
		}
		if del.Succeeded {
			return nil
		}
	}
}
