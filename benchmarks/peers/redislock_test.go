package peers

import (
	"context"
	"testing"
	"time"

	"github.com/bsm/redislock"
	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
)

// redislockClient is bsm/redislock on its own Redis client, retrying every
// 10 ms (LinearBackoff) until it obtains the lock.
func redislockClient(_ testing.TB, addr string) locker.Locker {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	rl := redislock.New(c)
	opt := &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)}
	return shim{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			l, err := rl.Obtain(ctx, prefix+key, ttl, opt)
			if err != nil {
				return nil, err
			}
			return l.Release, nil
		},
		close: c.Close,
	}
}
