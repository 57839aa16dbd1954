package peers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
)

// Where ours is short of the ceiling, the floor subject shows how much of
// the shortfall any lock that hands the key over in its release pays here.

// fifoQueue puts a waiter's id at the tail of the key's list and says
// whether it heads it; fifoRelease takes the head off and publishes to the
// next waiter's channel.
var (
	fifoQueue = goredis.NewScript(`
redis.call('RPUSH', KEYS[1], ARGV[1])
return redis.call('LINDEX', KEYS[1], 0) == ARGV[1] and 1 or 0`)
	fifoRelease = goredis.NewScript(`
redis.call('LPOP', KEYS[1])
local next = redis.call('LINDEX', KEYS[1], 0)
if next then redis.call('PUBLISH', ARGV[1] .. next, 'g') end
return 1`)
)

// fifoFloorClient is the least a FIFO hand-off through Redis can cost, a
// bound for ours, not a lock to use: no TTL, fence, re-entry or crash
// safety. A Lock queues its id in one script and, unless it heads the
// queue, waits for a message on its own channel; Unlock pops it and
// publishes to the next waiter in one script. Each hand-off is one short
// script and one pub/sub message, the path ours takes (its release grants
// the key and publishes the grant), with nothing else on it.
func fifoFloorClient(tb testing.TB, addr string) locker.Locker {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	id, wakes := fmt.Sprint(rand.Uint64()), prefix+"w:"
	ps := c.Subscribe(ctx, wakes+id)
	if _, err := ps.Receive(ctx); err != nil { // subscribed before any Lock
		tb.Fatal(err)
	}
	granted := ps.Channel()
	return shim{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			q := []string{prefix + "fifo:" + key}
			head, err := fifoQueue.Run(ctx, c, q, id).Int()
			if err != nil {
				return nil, err
			}
			if head == 0 {
				select {
				case <-granted:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return func(ctx context.Context) error { return fifoRelease.Run(ctx, c, q, wakes).Err() }, nil
		},
		close: func() error { _ = ps.Close(); return c.Close() },
	}
}
