package redis

import "time"

// CommandCounter is the go-redis hook that counts a client's commands, for
// the external tests.
type CommandCounter = counter

// WithShardLinger sets how long a Locker's shard subscriptions outlive
// their last waiter on a slotted cluster (shardLinger), for the external
// tests.
func WithShardLinger(d time.Duration) Option { return func(r *redisDriver) { r.shardLinger = d } }
