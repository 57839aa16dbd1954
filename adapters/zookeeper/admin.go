package zookeeper

import (
	"context"
	"errors"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
)

// Status returns the holder of key: the first node of its queue. Holds is
// the hold count when this Locker is the holder (re-entry is counted per
// Locker, not in ZooKeeper), else 1. Expires is zero: the lock lives as
// long as the holder's session.
func (z *zkDriver) Status(ctx context.Context, key string) (locker.LockInfo, error) {
	info, _, err := z.holder(ctx, key)
	return info, err
}

// List returns the held locks whose keys begin with prefix: escape keeps
// prefixes, so only the key nodes whose names begin with escape(prefix)
// are read.
func (z *zkDriver) List(ctx context.Context, prefix string) ([]locker.LockInfo, error) {
	names, err := call(ctx, func() ([]string, error) {
		c, _, err := z.primary.conn.Children(z.cfg.root)
		return c, err
	})
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
func (z *zkDriver) ForceUnlock(ctx context.Context, key string) error {
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
		children, err := call(ctx, func() ([]string, error) {
			c, _, err := z.primary.conn.Children(parent)
			return c, err
		})
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
		type got struct {
			data []byte
			stat *zk.Stat
		}
		g, err := call(ctx, func() (got, error) {
			data, st, err := z.primary.conn.Get(path)
			return got{data, st}, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return locker.LockInfo{}, "", backendErr("read holder", err)
		}
		return locker.LockInfo{
			Key: key, Owner: string(g.data), Fence: uint64(g.stat.Czxid),
			Holds: z.localHolds(path), Waiters: len(nodes) - 1,
		}, path, nil
	}
	return locker.LockInfo{}, "", locker.Unavailable(errors.New("locker/zookeeper: the holder keeps changing"))
}

// localHolds is the hold count of path if this Locker holds it, else 1.
func (z *zkDriver) localHolds(path string) int {
	z.mu.Lock()
	defer z.mu.Unlock()
	for _, h := range z.holds {
		if h.path == path && h.count > 0 {
			return h.count
		}
	}
	return 1
}
