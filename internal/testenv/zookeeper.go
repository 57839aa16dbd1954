package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ZKEnsemble is a 3-server ZooKeeper ensemble of a fault test's own, so
// that killing a server disturbs no other test.
type ZKEnsemble struct {
	t     testing.TB
	Addrs []string // each server's client host:port
	cmds  []*exec.Cmd
	cfgs  []string // each server's zoo.cfg
	cp    string
}

// zkClasspath finds ZooKeeper's jars as scripts/backends does: ZK_CLASSPATH,
// else Debian's (with slf4j-simple for its logging, when present).
func zkClasspath() string {
	if cp := os.Getenv("ZK_CLASSPATH"); cp != "" {
		return cp
	}
	const jar, log = "/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"
	if _, err := os.Stat(jar); err != nil {
		return ""
	}
	if _, err := os.Stat(log); err == nil {
		return jar + ":" + log
	}
	return jar
}

// StartZKEnsemble starts three servers on free loopback ports and waits
// until each serves in the quorum; t's cleanup kills them.
func StartZKEnsemble(t testing.TB) *ZKEnsemble {
	t.Helper()
	cp := zkClasspath()
	if _, err := exec.LookPath("java"); err != nil || cp == "" {
		t.Fatal("java or ZooKeeper's jars not found (scripts/backends up installs them)")
	}
	e := &ZKEnsemble{t: t, cp: cp, cmds: make([]*exec.Cmd, 3)}
	var servers []string
	for i := range 3 {
		e.Addrs = append(e.Addrs, freeAddr(t))
		servers = append(servers, fmt.Sprintf("server.%d=%s:%s", i+1, freeAddr(t), port(freeAddr(t)))) // quorum, election
	}
	for i := range 3 {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "myid"), []byte(fmt.Sprint(i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(dir, "zoo.cfg")
		conf := fmt.Sprintf("tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPortAddress=127.0.0.1\nclientPort=%s\n"+
			"maxClientCnxns=0\nminSessionTimeout=1000\nmaxSessionTimeout=120000\n4lw.commands.whitelist=srvr\n"+
			"admin.enableServer=false\n%s\n", dir, port(e.Addrs[i]), strings.Join(servers, "\n"))
		if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		e.cfgs = append(e.cfgs, cfg)
		e.spawn(i)
	}
	t.Cleanup(func() {
		for i := range e.cmds {
			e.Kill(i)
		}
	})
	for i := range 3 {
		e.wait(i)
	}
	return e
}

// URL is the ensemble's zk:// URL with the given root.
func (e *ZKEnsemble) URL(root string) string { return "zk://" + strings.Join(e.Addrs, ",") + root }

// Leader returns the index of the server that leads.
func (e *ZKEnsemble) Leader() int {
	e.t.Helper()
	for i, a := range e.Addrs {
		if strings.Contains(srvr(a), "Mode: leader") {
			return i
		}
	}
	e.t.Fatal("no ZooKeeper server says it leads")
	return -1
}

// Kill ends server i at once (SIGKILL); safe to call twice.
func (e *ZKEnsemble) Kill(i int) {
	cmd := e.cmds[i]
	if cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// Restart kills every server at once (SIGKILL) and starts them all again
// with their data, as after a power cut, and waits until each serves.
func (e *ZKEnsemble) Restart() {
	e.t.Helper()
	for i := range e.cmds {
		e.Kill(i)
	}
	for i := range e.cmds {
		e.spawn(i)
	}
	for i := range e.cmds {
		e.wait(i)
	}
}

func (e *ZKEnsemble) spawn(i int) {
	e.t.Helper()
	cmd := exec.Command("java", "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true",
		"-Dzookeeper.forceSync=no", "-Dznode.container.checkIntervalMs=1000", "-Dzookeeper.admin.enableServer=false",
		"-cp", e.cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", e.cfgs[i])
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.cmds[i] = cmd
}

// wait polls server i until it serves in a quorum.
func (e *ZKEnsemble) wait(i int) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(srvr(e.Addrs[i]), "Mode: ") {
		if time.Now().After(deadline) {
			e.t.Fatalf("ZooKeeper server %s not serving within 60s", e.Addrs[i])
		}
		time.Sleep(50 * time.Millisecond) // a server starting up offers nothing to wait on
	}
}

// srvr sends ZooKeeper's srvr four-letter word to addr and returns the reply.
func srvr(addr string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return ""
	}
	var b strings.Builder
	buf := make([]byte, 1024)
	for {
		n, err := c.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}
