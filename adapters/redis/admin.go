package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/rediskey"
)

// Status returns the holder of key, or ErrNotHeld.
func (d *redisDriver) Status(ctx context.Context, key string) (locker.LockInfo, error) {
	k := d.keys(key)
	pipe := d.client.Pipeline()
	get := pipe.Get(ctx, k[0])
	pttl := pipe.PTTL(ctx, k[0])
	waiters := pipe.ZCard(ctx, k[1])
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return locker.LockInfo{}, backendErr(ctx, err)
	}
	v, err := get.Result()
	if errors.Is(err, goredis.Nil) {
		return locker.LockInfo{}, fmt.Errorf("%w: %q is free", locker.ErrNotHeld, key)
	}
	parts := strings.SplitN(v, ":", 3) // fence:ids:owner
	fence, err := strconv.ParseUint(parts[0], 10, 64)
	if len(parts) != 3 || err != nil {
		return locker.LockInfo{}, fmt.Errorf("locker/redis: malformed lock value at %q", key)
	}
	info := locker.LockInfo{Key: key, Owner: parts[2], Fence: fence, Holds: len(strings.Fields(parts[1])), Waiters: int(waiters.Val())}
	if pttl.Val() > 0 {
		info.Expires = time.Now().Add(pttl.Val())
	}
	return info, nil
}

// List returns the held locks whose keys begin with prefix.
func (d *redisDriver) List(ctx context.Context, prefix string) ([]locker.LockInfo, error) {
	match := rediskey.MatchPrefix(d.lockKey(prefix))
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
	var err error
	if cc, ok := d.client.(*goredis.ClusterClient); ok { // SCAN is per node
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, d.client)
	}
	if err != nil {
		return nil, backendErr(ctx, err)
	}
	infos := make([]locker.LockInfo, 0, len(keys))
	for _, k := range keys {
		info, err := d.Status(ctx, strings.TrimPrefix(k, d.lockKey("")))
		if errors.Is(err, locker.ErrNotHeld) {
			continue // released since the scan
		}
		if err != nil {
			return nil, err
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// ForceUnlock deletes key's lock whoever holds it and wakes its waiters.
// The holder finds out at its next refresh (within TTL/3 with keep-alive).
func (d *redisDriver) ForceUnlock(ctx context.Context, key string) error {
	n, err := forceScript.Run(ctx, d.client, d.keys(key), d.wakePrefix()).Int()
	if err != nil {
		return backendErr(ctx, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q is free", locker.ErrNotHeld, key)
	}
	return nil
}
