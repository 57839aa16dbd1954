package redis_test

import (
	"testing"

	"github.com/locker-go/locker/internal/testenv"
)

// The fault matrix's load run: 400 waiters on one key, then 64 clients
// over 1,000 keys, fenced counters exact, history linearizable.
func TestLoadRedis(t *testing.T) {
	testenv.Load(t, testenv.URL(t, "LOCKER_TEST_REDIS").String())
}

// The same load run on the Redis Cluster: its 1,000 keys spread over the
// masters, the 400 waiters on one key woken through its shard channel.
func TestLoadRedisCluster(t *testing.T) {
	testenv.Load(t, testenv.URL(t, "LOCKER_TEST_REDIS_CLUSTER").String())
}
