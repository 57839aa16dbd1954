package zookeeper_test

import (
	"testing"

	"github.com/locker-go/locker/internal/testenv"
)

// The leader of a 3-server ensemble killed under contention: no two
// holders at once, no fence going back, and waiters go on once the
// ensemble has a new leader.
func TestLeaderKilledUnderContention(t *testing.T) {
	testenv.URL(t, "LOCKER_TEST_ZK") // -short skips; the ensemble is our own
	e := testenv.StartZKEnsemble(t)
	testenv.KillUnderContention(t, e.URL("/locker"), func() { e.Kill(e.Leader()) })
}
