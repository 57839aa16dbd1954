package zookeeper

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/wait"
)

// Status returns the holder of key: the first node of its queue. Holds is
// the hold count when this Locker is the holder (re-entry is counted per
// Locker, not in ZooKeeper), else 1. Expires is zero: the lock lives as
// long as the holder's session.
func (z *Locker) Status(ctx context.Context, key string) (locker.LockInfo, error) {
	if err := z.set.CheckKey(key); err != nil {
		return locker.LockInfo{}, err
	}
	ctx, stop := z.set.Context(ctx)
	defer stop()
	info, _, err := z.holder(ctx, key)
	return info, wait.CtxErr(ctx, key, err)
}

// List returns the held locks whose keys begin with prefix, sorted by key.
func (z *Locker) List(ctx context.Context, prefix string) ([]locker.LockInfo, error) {
	if err := z.set.Check(); err != nil {
		return nil, err
	}
	ctx, stop := z.set.Context(ctx)
	defer stop()
	names, err := call(ctx, func() ([]string, error) {
		c, _, err := z.primary.conn.Children(z.cfg.root)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, wait.CtxErr(ctx, prefix, backendErr("list keys", err))
	}
	var keys []string
	for _, n := range names {
		if key, err := unescape(n); err == nil && strings.HasPrefix(n, escape(prefix)) && escape(key) == n {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	var out []locker.LockInfo
	for _, key := range keys {
		info, _, err := z.holder(ctx, key)
		if errors.Is(err, locker.ErrNotHeld) {
			continue
		}
		if err != nil {
			return nil, wait.CtxErr(ctx, prefix, err)
		}
		out = append(out, info)
	}
	return out, nil
}

// ForceUnlock deletes the holder's node; the next in the queue then holds
// the key. The holder's watch on its own node reports its lease lost.
func (z *Locker) ForceUnlock(ctx context.Context, key string) error {
	if err := z.set.CheckKey(key); err != nil {
		return err
	}
	ctx, stop := z.set.Context(ctx)
	defer stop()
	_, path, err := z.holder(ctx, key)
	if err != nil {
		return wait.CtxErr(ctx, key, err)
	}
	_, err = call(ctx, func() (struct{}, error) { return struct{}{}, z.primary.conn.Delete(path, -1) })
	if errors.Is(err, zk.ErrNoNode) {
		return nil // released meanwhile
	}
	return wait.CtxErr(ctx, key, backendErr("delete holder's node", err))
}

// holder reads the first node of key's queue; ErrNotHeld if there is none.
func (z *Locker) holder(ctx context.Context, key string) (locker.LockInfo, string, error) {
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
func (z *Locker) localHolds(path string) int {
	z.mu.Lock()
	defer z.mu.Unlock()
	for _, h := range z.holds {
		if h.path == path && h.count > 0 {
			return h.count
		}
	}
	return 1
}
