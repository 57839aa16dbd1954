package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// EtcdCluster is a 3-member etcd cluster of a fault test's own, so that
// killing a member disturbs no other test. Members keep their data in
// t's temporary directory; Start brings a killed one back with it.
type EtcdCluster struct {
	t         testing.TB
	Endpoints []string // host:port of each member's client URL
	peers     []string
	dirs      []string
	cmds      []*exec.Cmd
}

// StartEtcdCluster starts three members on free loopback ports and waits
// until each is healthy (the cluster has a leader); t's cleanup kills them.
func StartEtcdCluster(t testing.TB) *EtcdCluster {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Fatalf("etcd not found (scripts/backends up installs it): %v", err)
	}
	c := &EtcdCluster{t: t, cmds: make([]*exec.Cmd, 3)}
	for range 3 {
		c.Endpoints = append(c.Endpoints, freeAddr(t))
		c.peers = append(c.peers, freeAddr(t))
		c.dirs = append(c.dirs, t.TempDir())
	}
	for i := range 3 {
		c.spawn(i, "new")
	}
	t.Cleanup(func() {
		for i := range 3 {
			c.Kill(i)
		}
	})
	for i := range 3 {
		c.wait(i)
	}
	return c
}

// URL is the cluster's etcd:// URL with the given key prefix.
func (c *EtcdCluster) URL(prefix string) string {
	return "etcd://" + strings.Join(c.Endpoints, ",") + prefix
}

// Kill ends member i at once (SIGKILL); safe to call twice.
func (c *EtcdCluster) Kill(i int) {
	cmd := c.cmds[i]
	if cmd == nil || cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// Start brings killed member i back, with its data, and waits until it is
// healthy again.
func (c *EtcdCluster) Start(i int) {
	c.t.Helper()
	c.spawn(i, "existing")
	c.wait(i)
}

// Restart kills every member at once (SIGKILL) and starts them all again
// with their data, as after a power cut, and waits until each is healthy.
func (c *EtcdCluster) Restart() {
	c.t.Helper()
	for i := range c.cmds {
		c.Kill(i)
	}
	for i := range c.cmds {
		c.spawn(i, "existing")
	}
	for i := range c.cmds {
		c.wait(i)
	}
}

func (c *EtcdCluster) spawn(i int, state string) {
	c.t.Helper()
	var cluster []string
	for j, p := range c.peers {
		cluster = append(cluster, fmt.Sprintf("m%d=http://%s", j, p))
	}
	cmd := exec.Command("etcd", "--name", fmt.Sprintf("m%d", i), "--data-dir", c.dirs[i],
		"--listen-client-urls", "http://"+c.Endpoints[i], "--advertise-client-urls", "http://"+c.Endpoints[i],
		"--listen-peer-urls", "http://"+c.peers[i], "--initial-advertise-peer-urls", "http://"+c.peers[i],
		"--initial-cluster", strings.Join(cluster, ","), "--initial-cluster-token", "locker-fault-test",
		"--initial-cluster-state", state, "--unsafe-no-fsync", "--logger=zap", "--log-outputs=stderr")
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.cmds[i] = cmd
}

// wait polls member i's /health until it reports a leader.
func (c *EtcdCluster) wait(i int) {
	c.t.Helper()
	client := http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get("http://" + c.Endpoints[i] + "/health")
		if err == nil {
			var b [256]byte
			n, _ := resp.Body.Read(b[:])
			resp.Body.Close()
			if strings.Contains(string(b[:n]), `"true"`) {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("etcd member %s not healthy within 30s: %v", c.Endpoints[i], err)
		}
		time.Sleep(50 * time.Millisecond) // a server starting up offers nothing to wait on
	}
}

// freeAddr returns a loopback host:port that was free a moment ago, below
// the ephemeral range (and above the ports of scripts/backends): a server
// killed and started again on it must not find it taken meanwhile by some
// client's outgoing connection, as an etcd member's once was.
func freeAddr(t testing.TB) string {
	t.Helper()
	const lo = 20000
	hi := ephemeralLow()
	for range 1000 {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", lo+rand.IntN(hi-lo)))
		if err == nil {
			defer ln.Close()
			return ln.Addr().String()
		}
	}
	t.Fatalf("no free loopback port in %d-%d", lo, hi-1)
	return ""
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if f := strings.Fields(string(b)); err == nil && len(f) == 2 {
		if n, err := strconv.Atoi(f[0]); err == nil && n > 20100 {
			return n
		}
	}
	return 32768
}
