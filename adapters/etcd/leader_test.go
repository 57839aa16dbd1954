package etcd_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locker-go/locker/internal/testenv"
)

// leaderOf returns the index of c's leader.
func leaderOf(t *testing.T, endpoints []string) int {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i, ep := range endpoints {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cli.Status(ctx, ep)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return i
		}
	}
	t.Fatal("no member says it leads")
	return -1
}

// The leader of a 3-member cluster killed under contention: no two holders
// at once, no fence going back, and waiters go on once a new leader is
// elected.
func TestLeaderKilledUnderContention(t *testing.T) {
	testenv.URL(t, "LOCKER_TEST_ETCD") // -short skips; the cluster is our own
	cluster := testenv.StartEtcdCluster(t)
	testenv.KillUnderContention(t, cluster.URL("/locker"), func() { cluster.Kill(leaderOf(t, cluster.Endpoints)) })
}

// Every member of the cluster killed at once under contention and started
// again with its data: no two holders at once, no fence going back (the
// history says so), and waiters go on once the cluster is back.
func TestClusterKilledAndRestartedUnderContention(t *testing.T) {
	testenv.URL(t, "LOCKER_TEST_ETCD") // -short skips; the cluster is our own
	cluster := testenv.StartEtcdCluster(t)
	testenv.KillUnderContention(t, cluster.URL("/locker"), cluster.Restart)
}
