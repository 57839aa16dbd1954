package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/rediskey"
)

// Status returns the S, X or L holders of key in space, or ErrNotHeld.
func (d *redisDriver) Status(ctx context.Context, space driver.Space, key string) (locker.LockInfo, error) {
	k := d.keys(space, key)
	v, err := statusScript.Run(ctx, d.client, k[:3]).Slice()
	if err != nil {
		return locker.LockInfo{}, backendErr(ctx, err)
	}
	info := locker.LockInfo{Key: key, Space: space, Mode: driver.Shared}
	limit := 0
	if len(v) > 1 {
		info.Waiters, limit = int(v[0].(int64)), int(v[1].(int64))
	}
	now := time.Now()
	for i := 2; i+4 < len(v); i += 5 {
		m, owner, fence, holds, left := v[i].(int64), v[i+1].(string), v[i+2].(int64), v[i+3].(int64), v[i+4].(int64)
		if driver.Mode(m) != driver.Shared {
			info.Mode = driver.Mode(m)
		}
		info.Holders = append(info.Holders, driver.Holder{Owner: owner, Fence: uint64(fence), Holds: int(holds), Expires: now.Add(time.Duration(left) * time.Millisecond)})
	}
	if len(info.Holders) == 0 {
		return locker.LockInfo{}, fmt.Errorf("%w: %q is free", locker.ErrNotHeld, key)
	}
	if info.Mode == driver.Limited {
		info.Limit = limit
	}
	slices.SortFunc(info.Holders, func(a, b driver.Holder) int { return cmp.Compare(a.Fence, b.Fence) })
	first := info.Holders[0]
	info.Owner, info.Fence, info.Holds, info.Expires = first.Owner, first.Fence, first.Holds, first.Expires
	return info, nil
}

// List returns the held locks of both spaces whose keys begin with prefix.
func (d *redisDriver) List(ctx context.Context, prefix string) ([]locker.LockInfo, error) {
	var infos []locker.LockInfo
	for _, space := range []driver.Space{driver.Plain, driver.Subtree} {
		keys, err := d.scan(ctx, d.lockPattern(space, prefix))
		if err != nil {
			return nil, backendErr(ctx, err)
		}
		for _, k := range keys {
			info, err := d.Status(ctx, space, d.untag(space, k))
			if errors.Is(err, locker.ErrNotHeld) {
				continue // released since the scan
			}
			if err != nil {
				return nil, err
			}
			infos = append(infos, info)
		}
	}
	return infos, nil
}

// scan returns the keys matching match, on every master of a cluster.
func (d *redisDriver) scan(ctx context.Context, match string) ([]string, error) {
	var (
		mu   sync.Mutex
		keys []string
	)
	scan := func(ctx context.Context, c goredis.UniversalClient) error {
		found, err := rediskey.Scan(ctx, c, match)
		mu.Lock()
		keys = append(keys, found...)
		mu.Unlock()
		return err
	}
	if cc, ok := d.client.(*goredis.ClusterClient); ok { // SCAN is per node
		return keys, cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return scan(ctx, c) })
	}
	return keys, scan(ctx, d.client)
}

// ForceUnlock drops key's S, X and L holders whoever they are and wakes
// its waiters. The holders find out at their next refresh (within TTL/3 with
// keep-alive).
func (d *redisDriver) ForceUnlock(ctx context.Context, space driver.Space, key string) error {
	n, err := forceScript.Run(ctx, d.client, d.keys(space, key), d.wake(space, key)).Int()
	if err != nil {
		return backendErr(ctx, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q is free", locker.ErrNotHeld, key)
	}
	return nil
}
