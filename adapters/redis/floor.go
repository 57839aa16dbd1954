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

// RaiseFence raises the counter that key's fences come from (the
// prefix's, or the lock's own on a slotted cluster), so key's later fences
// are above floor.
func (d *redisDriver) RaiseFence(ctx context.Context, space driver.Space, key string, floor uint64) error {
	if floor == 0 {
		return nil
	}
	if err := raiseScript.Run(ctx, d.client, []string{d.fenceKey(space, key)}, strconv.FormatUint(floor, 10)).Err(); err != nil {
		return backendErr(ctx, err)
	}
	return nil
}

// raiseFor raises each of rs's counters to its Floor, before their
// acquire: a round trip more, for a Migration's requests alone.
func (d *redisDriver) raiseFor(ctx context.Context, rs ...*driver.Request) error {
	for _, r := range rs {
		if err := d.RaiseFence(ctx, r.Space, r.Key, r.Floor); err != nil {
			return err
		}
	}
	return nil
}
