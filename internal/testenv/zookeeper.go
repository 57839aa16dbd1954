package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker/internal/servers"
)

// ZKEnsemble is a 3-server ZooKeeper ensemble of a fault test's own, so
// that killing a server disturbs no other test.
type ZKEnsemble struct {
	t     testing.TB
	Addrs []string // each server's client host:port
	ensemble
}

// StartZKEnsemble starts three servers on free loopback ports and waits
// until each serves in the quorum; t's cleanup kills them.
func StartZKEnsemble(t testing.TB) *ZKEnsemble {
	t.Helper()
	e := &ZKEnsemble{t: t}
	peers := make([]servers.ZKPeer, 3)
	for i := range peers {
		peers[i] = servers.ZKPeer{Quorum: freePort(t), Election: freePort(t)}
	}
	for i := range peers {
		srv := servers.ZooKeeper{Dir: t.TempDir(), Port: freePort(t), ID: i + 1, Peers: peers}
		e.Addrs = append(e.Addrs, servers.Addr(srv.Port))
		e.ensemble = append(e.ensemble, &process{t: t, name: "zookeeper " + servers.Addr(srv.Port),
			command: srv.Cmd, answers: srv.Answers, within: time.Minute})
	}
	t.Cleanup(e.killAll)
	e.startAll()
	return e
}

// URL is the ensemble's zk:// URL with the given root.
func (e *ZKEnsemble) URL(root string) string { return "zk://" + strings.Join(e.Addrs, ",") + root }

// Leader returns the index of the server that leads.
func (e *ZKEnsemble) Leader() int {
	e.t.Helper()
	for i, a := range e.Addrs {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		mode := servers.ZKMode(ctx, a)
		cancel()
		if mode == "leader" {
			return i
		}
	}
	e.t.Fatal("no ZooKeeper server says it leads")
	return -1
}
