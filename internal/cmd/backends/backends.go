package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/locker-go/locker/internal/servers"
)

// DESIGN.md's ports ("Backends for tests and development", "Scale-out").
const (
	redisPort    = 16379
	zkPort       = 12181
	etcdPort     = 12379 // its peer port is the next
	postgresPort = 15432
	mysqlPort    = 13306
	login        = "locker" // the SQL servers' user, password and database
)

var (
	redlockPorts      = []int{16380, 16381, 16382, 16383, 16384}
	redisClusterPorts = []int{17001, 17002, 17003} // each master's cluster bus: port+10000
	zkEnsemblePorts   = []int{12281, 12381, 12481} // client p, quorum p+1, election p+2
	etcdClusterPorts  = []int{12479, 12579, 12679} // client p, peer p+1
)

// A backend is what a test names: one server or several.
type backend struct {
	name    string
	addr    string // for status
	servers []*server
	// ready runs once every server of ours answers as started (a
	// cluster's slots, the SQL servers' logins); it leaves alone a
	// backend someone else serves.
	ready func(ctx context.Context) error
	noun  string // "masters answer": a status line of several servers counts them
	err   error  // why it cannot be started here
}

func (e *env) backends(names []string) []*backend {
	recipes := map[string]func() *backend{
		"redis": func() *backend { return e.redis("redis", redisPort) },
		"redlock": func() *backend {
			b := e.redis("redlock", redlockPorts...)
			b.addr, b.noun = fmt.Sprintf("127.0.0.1:%d-%d", redlockPorts[0], redlockPorts[len(redlockPorts)-1]), "masters answer"
			return b
		},
		"redis-cluster": e.redisCluster,
		"zookeeper":     func() *backend { return e.zookeeper() },
		"zk-ensemble":   e.zkEnsemble,
		"etcd":          e.etcd,
		"etcd-cluster":  e.etcdCluster,
		"postgres":      e.postgres,
		"mysql":         e.mysql,
	}
	bs := make([]*backend, 0, len(names))
	for _, n := range names {
		bs = append(bs, recipes[n]())
	}
	return bs
}

// redisServer is the server of one port: it keeps nothing on disk.
func (e *env) redisServer(port int, extra ...string) (*server, servers.Redis) {
	r := servers.Redis{Port: port, Dir: filepath.Join(e.state, fmt.Sprintf("redis-%d", port)), Extra: extra}
	return &server{label: "redis " + servers.Addr(port), log: filepath.Join(r.Dir, "redis.log"),
		pidFile: filepath.Join(r.Dir, "redis.pid"), title: r.Title(), stopSig: syscall.SIGTERM,
		prepare: func() (*exec.Cmd, error) { return r.Cmd() }, answers: r.Answers}, r
}

func (e *env) redis(name string, ports ...int) *backend {
	b := &backend{name: name, addr: servers.Addr(ports[0])}
	for _, p := range ports {
		s, _ := e.redisServer(p)
		b.servers = append(b.servers, s)
	}
	return b
}

// redisCluster: three masters, no replicas; a node keeps its identity and
// slots in its directory, so one restarted after a kill rejoins, empty.
func (e *env) redisCluster() *backend {
	ps := redisClusterPorts
	b := &backend{name: "redis-cluster", addr: fmt.Sprintf("127.0.0.1:%d-%d", ps[0], ps[len(ps)-1]), noun: "masters in a cluster with state ok"}
	var addrs []string
	for _, p := range ps {
		s, r := e.redisServer(p, servers.RedisClusterNode(0)...) // its bus on port+10000
		s.started, s.answers = r.Answers, servers.RedisClusterOK(servers.Addr(p), len(ps))
		b.servers, addrs = append(b.servers, s), append(addrs, servers.Addr(p))
	}
	b.ready = func(ctx context.Context) error {
		info, err := servers.RedisClusterInfo(ctx, addrs[0])
		if err != nil || !strings.Contains(info, "cluster_slots_assigned:0\r") {
			return err // a cluster already: its nodes agree on their own
		}
		return servers.CreateRedisCluster(ctx, addrs)
	}
	return b
}

func (e *env) zkServer(label string, z servers.ZooKeeper) *server {
	return &server{label: label + " " + servers.Addr(z.Port), log: filepath.Join(z.Dir, "zookeeper.log"),
		pidFile: filepath.Join(z.Dir, "zookeeper.pid"), title: []string{z.ConfigFile()}, stopSig: syscall.SIGTERM,
		prepare: z.Cmd, answers: z.Answers}
}

func (e *env) zookeeper() *backend {
	z := servers.ZooKeeper{Dir: filepath.Join(e.state, "zookeeper"), Port: zkPort}
	return &backend{name: "zookeeper", addr: servers.Addr(zkPort), servers: []*server{e.zkServer("zookeeper", z)}}
}

func (e *env) zkEnsemble() *backend {
	ps := zkEnsemblePorts
	b := &backend{name: "zk-ensemble", addr: fmt.Sprintf("127.0.0.1:%d,%d,%d", ps[0], ps[1], ps[2]), noun: "members answer"}
	var peers []servers.ZKPeer
	for _, p := range ps {
		peers = append(peers, servers.ZKPeer{Quorum: p + 1, Election: p + 2})
	}
	for i, p := range ps {
		z := servers.ZooKeeper{Dir: filepath.Join(e.state, "zk-ensemble", fmt.Sprintf("zk%d", i+1)), Port: p, ID: i + 1, Peers: peers}
		b.servers = append(b.servers, e.zkServer("zookeeper", z))
	}
	return b
}

func (e *env) etcdServer(m servers.Etcd) *server {
	return &server{label: "etcd " + servers.Addr(m.Client), log: filepath.Join(m.Dir, "etcd.log"),
		pidFile: filepath.Join(m.Dir, "etcd.pid"), title: []string{m.Data()}, stopSig: syscall.SIGTERM,
		prepare: m.Cmd, answers: m.Answers}
}

func (e *env) etcd() *backend {
	m := servers.Etcd{Name: "locker", Dir: filepath.Join(e.state, "etcd"), Client: etcdPort, Peer: etcdPort + 1,
		Cluster: servers.EtcdMember("locker", etcdPort+1), Token: "locker-test"}
	return &backend{name: "etcd", addr: servers.Addr(etcdPort), servers: []*server{e.etcdServer(m)}}
}

func (e *env) etcdCluster() *backend {
	ps := etcdClusterPorts
	b := &backend{name: "etcd-cluster", addr: fmt.Sprintf("127.0.0.1:%d,%d,%d", ps[0], ps[1], ps[2]), noun: "members answer"}
	var cluster string
	for i, p := range ps {
		cluster += fmt.Sprintf(",%s", servers.EtcdMember(fmt.Sprintf("m%d", i+1), p+1))
	}
	for i, p := range ps {
		m := servers.Etcd{Name: fmt.Sprintf("m%d", i+1), Dir: filepath.Join(e.state, "etcd-cluster", fmt.Sprintf("m%d", i+1)),
			Client: p, Peer: p + 1, Cluster: cluster[1:], Token: "locker-test-cluster"}
		b.servers = append(b.servers, e.etcdServer(m))
	}
	return b
}
