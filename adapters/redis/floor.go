package redis

import (
	"context"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/rediskey"
)

var _ driver.FenceFloorer = (*redisDriver)(nil)

// raiseScript: KEYS the fence counter; ARGV a floor. Raises the counter to
// the floor (started from the clock first if missing, as the acquire
// scripts would): every later fence is above it.
var raiseScript = goredis.NewScript(rediskey.RaiseTo("1", "1") + `return 1`)

// RaiseFence raises the counter that every key's fences come from (one per
// prefix), so key's later fences are above floor.
func (d *redisDriver) RaiseFence(ctx context.Context, _ driver.Space, _ string, floor uint64) error {
	if floor == 0 {
		return nil
	}
	if err := raiseScript.Run(ctx, d.client, []string{d.fenceKey()}, strconv.FormatUint(floor, 10)).Err(); err != nil {
		return backendErr(ctx, err)
	}
	return nil
}

// raiseFor raises the counter to the highest Floor of rs, before their
// acquire: a round trip more, for a Migration's requests alone.
func (d *redisDriver) raiseFor(ctx context.Context, rs ...*driver.Request) error {
	var floor uint64
	for _, r := range rs {
		floor = max(floor, r.Floor)
	}
	return d.RaiseFence(ctx, driver.Plain, "", floor)
}
