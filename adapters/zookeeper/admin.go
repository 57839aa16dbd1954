package zookeeper

import (
	"context"
	"errors"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// Status returns the holder of key: the first node of its queue. Holds is
// 1 (the portable Locker counts its own re-entered holds). Expires is
// zero: the lock lives as long as the holder's session.
func (z *zkDriver) Status(ctx context.Context, _ driver.Space, key string) (locker.LockInfo, error) {
	info, _, err := z.holder(ctx, key)
	return info, err
}

// List returns the held locks whose keys begin with prefix, reading only
// the key nodes whose names begin with escape(prefix).
func (z *zkDriver) List(ctx context.Context, prefix string) ([]locker.LockInfo, error) {
	names, err := z.primary.children(ctx, z.cfg.root)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, backendErr("list keys", err)
	}
	var out []locker.LockInfo
	for _, n := range names {
		key, err := unescape(n)
		if err != nil || !strings.HasPrefix(n, escape(prefix)) || escape(key) != n {
			continue // not a key node of ours
		}
		info, _, err := z.holder(ctx, key)
		if errors.Is(err, locker.ErrNotHeld) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// ForceUnlock deletes the holder's node; the next in the queue then holds
// the key. The holder's watch on its own node reports its lease lost.
func (z *zkDriver) ForceUnlock(ctx context.Context, _ driver.Space, key string) error {
	_, path, err := z.holder(ctx, key)
	if err != nil {
		return err
	}
	_, err = call(ctx, func() (struct{}, error) { return struct{}{}, z.primary.conn.Delete(path, -1) })
	if errors.Is(err, zk.ErrNoNode) {
		return nil // released meanwhile
	}
	return backendErr("delete holder's node", err)
}

// holder reads the first node of key's queue; ErrNotHeld if there is none.
func (z *zkDriver) holder(ctx context.Context, key string) (locker.LockInfo, string, error) {
	parent := z.cfg.root + "/" + escape(key)
	for range maxAttempts { // the holder may leave between listing and reading
		children, err := z.primary.children(ctx, parent)
		if errors.Is(err, zk.ErrNoNode) {
			return locker.LockInfo{}, "", locker.ErrNotHeld
		}
		if err != nil {
			return locker.LockInfo{}, "", backendErr("list queue", err)
		}
		nodes := lockNodes(children)
		if len(nodes) == 0 {
			return locker.LockInfo{}, "", locker.ErrNotHeld
		}
		path := parent + "/" + nodes[0]
		var st *zk.Stat
		owner, err := call(ctx, func() (o []byte, err error) {
			o, st, err = z.primary.conn.Get(path)
			return o, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return locker.LockInfo{}, "", backendErr("read holder", err)
		}
		return locker.LockInfo{Key: key, Owner: string(owner), Fence: uint64(st.Czxid), Holds: 1, Waiters: len(nodes) - 1}, path, nil
	}
	return locker.LockInfo{}, "", locker.Unavailable(errors.New("locker/zookeeper: the holder keeps changing"))
}
