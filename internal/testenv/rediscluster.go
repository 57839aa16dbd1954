package testenv

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
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
		s := startRedis(t, 0, "--save", "", "--appendonly", "no", "--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(freePort(t)), "--cluster-config-file", "nodes.conf", "--dir", t.TempDir(),
			"--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "no")
		c.Nodes, addrs[i] = append(c.Nodes, s), s.Addr
	}
	out, err := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for i := range c.Nodes {
		c.waitOK(i)
	}
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
	for j := range c.Nodes {
		c.waitOK(j)
	}
}

// waitOK waits until node i sees the cluster ok, with every node.
func (c *RedisCluster) waitOK(i int) {
	c.t.Helper()
	cl := goredis.NewClient(&goredis.Options{Addr: c.Nodes[i].Addr})
	defer cl.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, _ := cl.ClusterInfo(context.Background()).Result()
		if strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("redis cluster node %s not ok within 30s:\n%s", c.Nodes[i].Addr, info)
		}
		time.Sleep(50 * time.Millisecond) // the cluster bus settles on its own: nothing to wait on
	}
}
