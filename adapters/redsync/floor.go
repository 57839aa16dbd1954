package redsync

import (
	"context"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/rediskey"
)

var _ driver.FenceFloorer = (*redlock)(nil)

// raiseScript: KEYS the fence counter; ARGV a floor. Raises the counter to
// the floor (from the clock first if missing, as the grants would).
var raiseScript = goredis.NewScript(rediskey.RaiseTo("1", "1") + `return {1}`)

// RaiseFence raises the counter of a quorum of masters to floor: every
// later grant's quorum shares a master with it and counts past floor, and
// a fence is the largest count of its grants.
func (d *redlock) RaiseFence(ctx context.Context, _ driver.Space, _ string, floor uint64) error {
	if floor == 0 {
		return nil
	}
	res := d.round(ctx, locker.DefaultTTL, nil, raiseScript, []string{d.counterKey()}, strconv.FormatUint(floor, 10))
	return d.outcome(res, 1) // every master that answers raises: short of a quorum, unavailable
}

// raiseFor raises the counters to the highest Floor of rs, before their
// attempt: a round more, for a Migration's requests alone.
func (d *redlock) raiseFor(ctx context.Context, rs ...*driver.Request) error {
	var floor uint64
	for _, r := range rs {
		floor = max(floor, r.Floor)
	}
	return d.RaiseFence(ctx, driver.Plain, "", floor)
}
