package zookeeper_test

import (
	"testing"

	"github.com/locker-go/locker/internal/testenv"
)

// The fault matrix's load run: 400 waiters on one key, then 64 clients
// over 1,000 keys, fenced counters exact, history linearizable.
func TestLoadZooKeeper(t *testing.T) {
	testenv.Load(t, testenv.URL(t, "LOCKER_TEST_ZK").String())
}
