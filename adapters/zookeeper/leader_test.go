package zookeeper_test

import (
	"testing"

	"github.com/locker-go/locker/internal/testenv"
)

// The leader of a 3-server ensemble killed under contention: no two
// holders at once, no fence going back, and waiters go on once the
// ensemble has a new leader.
func TestLeaderKilledUnderContention(t *testing.T) {
	if testenv.Race {
		// Clients reconnecting after the kill meet go-zookeeper's
		// reconnect race (see the test below): a full run failed on it.
		t.Skip("runs without -race (go-zookeeper's reconnect race, upstream): scripts/test runs it in its non-race step")
	}
	testenv.URL(t, "LOCKER_TEST_ZK") // -short skips; the ensemble is our own
	e := testenv.StartZKEnsemble(t)
	testenv.KillUnderContention(t, e.URL("/locker"), func() { e.Kill(e.Leader()) })
}

// Every server of the ensemble killed at once under contention and started
// again with its data: no two holders at once, no fence going back (the
// history says so), and waiters go on once the ensemble serves again.
func TestEnsembleKilledAndRestartedUnderContention(t *testing.T) {
	if testenv.Race {
		// go-zookeeper's reconnect reads Conn.lastZxid in sendSetWatches
		// while recvLoop writes it (samuel/go-zookeeper#260, go-zookeeper/zk#35,
		// unfixed upstream): every client reconnects at once here, so the race
		// detector fails the test for the library's race, not ours.
		t.Skip("runs without -race (go-zookeeper's reconnect race, upstream): scripts/test runs it in its non-race step")
	}
	testenv.URL(t, "LOCKER_TEST_ZK") // -short skips; the ensemble is our own
	e := testenv.StartZKEnsemble(t)
	testenv.KillUnderContention(t, e.URL("/locker"), e.Restart)
}
