package testenv

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker/internal/servers"
)

// EtcdCluster is a 3-member etcd cluster of a fault test's own, so that
// killing a member disturbs no other test. Members keep their data in
// t's temporary directory; Start brings a killed one back with it.
type EtcdCluster struct {
	t         testing.TB
	Endpoints []string // host:port of each member's client URL
	ensemble
}

// StartEtcdCluster starts three members on free loopback ports and waits
// until each is healthy (the cluster has a leader); t's cleanup kills them.
func StartEtcdCluster(t testing.TB) *EtcdCluster {
	t.Helper()
	c := &EtcdCluster{t: t}
	members := make([]servers.Etcd, 3)
	var cluster []string
	for i := range members {
		members[i] = servers.Etcd{Name: fmt.Sprintf("m%d", i), Dir: t.TempDir(), Client: freePort(t), Peer: freePort(t),
			Token: "locker-fault-test"}
		cluster = append(cluster, servers.EtcdMember(members[i].Name, members[i].Peer))
	}
	for _, m := range members {
		m.Cluster = strings.Join(cluster, ",")
		c.Endpoints = append(c.Endpoints, servers.Addr(m.Client))
		c.ensemble = append(c.ensemble, &process{t: t, name: "etcd " + m.Name + " " + servers.Addr(m.Client),
			command: m.Cmd, answers: m.Answers, within: 30 * time.Second})
	}
	t.Cleanup(c.killAll)
	c.startAll()
	return c
}

// URL is the cluster's etcd:// URL with the given key prefix.
func (c *EtcdCluster) URL(prefix string) string {
	return "etcd://" + strings.Join(c.Endpoints, ",") + prefix
}

// Start brings killed member i back, with its data, and waits until it is
// healthy again. Like a member of Restart, it rejoins as an existing one:
// servers.Etcd sees its data.
func (c *EtcdCluster) Start(i int) {
	c.t.Helper()
	c.ensemble[i].start()
}
