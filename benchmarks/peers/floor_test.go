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

// leaseQueue and leaseRelease are fifoQueue and fifoRelease with what a
// lease needs at the least: the lock's key naming its holder, with the
// TTL (PX), a fence from a counter (KEYS[3]) at each grant, carried in the
// wake, and a release by the holder alone.
var (
	leaseQueue = goredis.NewScript(`
redis.call('RPUSH', KEYS[1], ARGV[1])
if redis.call('LINDEX', KEYS[1], 0) ~= ARGV[1] then return 0 end
local f = redis.call('INCR', KEYS[3])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return f`)
	leaseRelease = goredis.NewScript(`
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('LPOP', KEYS[1])
local next = redis.call('LINDEX', KEYS[1], 0)
if not next then
  redis.call('DEL', KEYS[2])
  return 1
end
local f = redis.call('INCR', KEYS[3])
redis.call('SET', KEYS[2], next, 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3] .. next, f)
return 1`)
)

// fifoLeaseFloorClient is fifoFloorClient with a lease's least records
// (leaseQueue, leaseRelease): the holder named in a key that lapses at
// its TTL, a fence per grant, a release by the holder alone. Still no
// crash safety (a lapsed holder stays first in the queue), re-entry or
// modes: a bound on what a FIFO lease costs here, not a lock to use.
func fifoLeaseFloorClient(tb testing.TB, addr string) locker.Locker {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	id, wakes := fmt.Sprint(rand.Uint64()), prefix+"lw:"
	ps := c.Subscribe(ctx, wakes+id)
	if _, err := ps.Receive(ctx); err != nil { // subscribed before any Lock
		tb.Fatal(err)
	}
	granted := ps.Channel()
	ttl := ttl.Milliseconds()
	return shim{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			keys := []string{prefix + "lq:" + key, prefix + "ll:" + key, prefix + "lf:" + key}
			fence, err := leaseQueue.Run(ctx, c, keys, id, ttl).Int64()
			if err != nil {
				return nil, err
			}
			if fence == 0 {
				select {
				case <-granted: // its payload, the fence
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return func(ctx context.Context) error { return leaseRelease.Run(ctx, c, keys, id, ttl, wakes).Err() }, nil
		},
		close: func() error { _ = ps.Close(); return c.Close() },
	}
}
