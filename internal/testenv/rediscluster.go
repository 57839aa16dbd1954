package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker/internal/servers"
)

// RedisCluster is a Redis Cluster of three masters (no replicas) of a
// fault test's own. A node keeps its identity and slots (nodes.conf in
// its own directory) but no data: restarted, it rejoins empty.
type RedisCluster struct {
	t     testing.TB
	Nodes []*RedisServer
}

// StartRedisCluster runs three cluster-enabled redis-servers on free
// ports, gives them the slots and waits until the cluster is ok.
func StartRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	c := &RedisCluster{t: t}
	addrs := make([]string, 3)
	for i := range 3 {
		// The cluster bus port is given: port+10000, its default, may be
		// taken or past 65535.
		s := newRedis(t, 0, servers.RedisClusterNode(freePort(t))...)
		s.start()
		c.Nodes, addrs[i] = append(c.Nodes, s), s.Addr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := servers.CreateRedisCluster(ctx, addrs); err != nil {
		t.Fatal(err)
	}
	c.waitOK()
	return c
}

// URL is the cluster's redis-cluster:// URL with query q (e.g. "prefix=x:").
func (c *RedisCluster) URL(q string) string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return "redis-cluster://" + strings.Join(addrs, ",") + "?" + q
}

// Restart starts node i again (after Kill): empty, with its slots.
func (c *RedisCluster) Restart(i int) {
	c.t.Helper()
	c.Nodes[i].start()
	c.waitOK()
}

// waitOK waits until every node sees the cluster ok, with every node: the
// cluster bus settles on its own.
func (c *RedisCluster) waitOK() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		if err := servers.Await(ctx, servers.RedisClusterOK(n.Addr, len(c.Nodes)), n.exit, 50*time.Millisecond); err != nil {
			c.t.Fatalf("redis cluster not ok within 30s: %v", err)
		}
	}
}
