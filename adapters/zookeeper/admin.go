package zookeeper

import (
	"context"
	"errors"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// Status returns the holders of key in space: the Shared, Exclusive or
// Limited nodes that hold (every node before each is compatible with it;
// for a Limited one of n, Limited of its n and fewer than n). Holds
// is 1 (the portable Locker counts its own re-entered holds). Expires is
// zero: the lock lives as long as the holder's session. Like List, it
// sees every lock taken before it was called, through any server.
func (z *zkDriver) Status(ctx context.Context, space driver.Space, key string) (locker.LockInfo, error) {
	if err := z.primary.sync(ctx, z.cfg.root); err != nil {
		return locker.LockInfo{}, backendErr("sync", err)
	}
	info, _, err := z.holders(ctx, space, key)
	return info, err
}

// List returns the held locks whose keys begin with prefix, in both
// spaces, reading only the key nodes whose names begin with escape(prefix),
// after a sync: the session's server may lag behind the lock's.
func (z *zkDriver) List(ctx context.Context, prefix string) ([]locker.LockInfo, error) {
	if err := z.primary.sync(ctx, z.cfg.root); err != nil {
		return nil, backendErr("sync", err)
	}
	names, err := z.primary.children(ctx, z.cfg.root)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, backendErr("list keys", err)
	}
	var out []locker.LockInfo
	for _, n := range names {
		space := driver.Plain
		if rest, ok := strings.CutPrefix(n, subtreeMark); ok {
			n, space = rest, driver.Subtree
		}
		key, err := unescape(n)
		if err != nil || !strings.HasPrefix(n, escape(prefix)) || escape(key) != n {
			continue // not a key node of ours
		}
		info, _, err := z.holders(ctx, space, key)
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

// ForceUnlock deletes the holders' nodes (Shared, Exclusive and Limited;
// intention holders are no locks of their own); the next in the queue
// then hold the key. Each holder's watch on its own node reports its lease lost.
func (z *zkDriver) ForceUnlock(ctx context.Context, space driver.Space, key string) error {
	if err := z.primary.sync(ctx, z.cfg.root); err != nil {
		return backendErr("sync", err)
	}
	_, paths, err := z.holders(ctx, space, key)
	if err != nil {
		return err
	}
	for _, path := range paths {
		_, err = call(ctx, func() (struct{}, error) { return struct{}{}, z.primary.conn.Delete(path, -1) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) { // gone: released meanwhile
			return backendErr("delete holder's node", err)
		}
	}
	return nil
}

// holders reads the holding Shared, Exclusive or Limited nodes of key's
// queue, and their paths; ErrNotHeld if there is none.
func (z *zkDriver) holders(ctx context.Context, space driver.Space, key string) (locker.LockInfo, []string, error) {
	parent := z.parent(space, key)
	for range maxAttempts { // a holder may leave between listing and reading
		children, err := z.primary.children(ctx, parent)
		if errors.Is(err, zk.ErrNoNode) {
			return locker.LockInfo{}, nil, locker.ErrNotHeld
		}
		if err != nil {
			return locker.LockInfo{}, nil, backendErr("list queue", err)
		}
		info, paths, err := z.describe(ctx, space, key, parent, lockNodes(children))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		return info, paths, err
	}
	return locker.LockInfo{}, nil, locker.Unavailable(errors.New("locker/zookeeper: the holders keep changing"))
}

// describe reads the holding nodes among nodes (by sequence), under parent.
func (z *zkDriver) describe(ctx context.Context, space driver.Space, key, parent string, nodes []string) (locker.LockInfo, []string, error) {
	info := locker.LockInfo{Key: key, Space: space, Mode: driver.Shared}
	var paths []string
	for i, name := range nodes {
		c := classOf(name)
		if block, _ := blockers(nodes[:i+1], name); len(block) > 0 {
			info.Waiters++
			continue
		}
		switch {
		case c.mode.Intent():
			continue
		case c.mode == driver.Exclusive:
			info.Mode = driver.Exclusive
		case c.mode == driver.Limited:
			info.Mode, info.Limit = driver.Limited, c.limit
		}
		path := parent + "/" + name
		var st *zk.Stat
		owner, err := call(ctx, func() (o []byte, err error) {
			o, st, err = z.primary.conn.Get(path)
			return o, err
		})
		if err != nil {
			if !errors.Is(err, zk.ErrNoNode) {
				err = backendErr("read holder", err)
			}
			return locker.LockInfo{}, nil, err
		}
		// Mzxid: a subtree node's fence is that of a write after its grant;
		// plus the key's offset (as of now: raised since, it shows higher).
		offset, err := readFloor(ctx, z.primary, z.floorPath(space, key))
		if err != nil {
			return locker.LockInfo{}, nil, err
		}
		fence := st.Czxid
		if space == driver.Subtree {
			fence = st.Mzxid // a key's first raise writes it too (floor.go): then it shows higher
		}
		info.Holders = append(info.Holders, locker.Holder{Owner: string(owner), Fence: uint64(fence + offset), Holds: 1})
		paths = append(paths, path)
	}
	if len(info.Holders) == 0 {
		return locker.LockInfo{}, nil, locker.ErrNotHeld
	}
	first := info.Holders[0]
	info.Owner, info.Fence, info.Holds = first.Owner, first.Fence, first.Holds
	if info.Mode == driver.Exclusive {
		info.Holders = nil // the Locker fills them in
	}
	return info, paths, nil
}
