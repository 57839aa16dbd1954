package zookeeper_test

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// gate is a zk.Dialer whose network a test can fail and restore. Drop
// closes its connections and refuses new ones, as a server restart does;
// Silence makes them a black hole, as a partition does: writes vanish and
// nothing arrives, so only timeouts notice. Up restores it.
type gate struct {
	mu    sync.Mutex
	state gateState
	conns []*gatedConn
}

type gateState int

const (
	gateUp gateState = iota
	gateDropped
	gateSilent
)

func (g *gate) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != gateUp {
		return nil, errors.New("gate: network down")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	gc := &gatedConn{Conn: c, g: g}
	g.conns = append(g.conns, gc)
	return gc, nil
}

func (g *gate) set(s gateState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.state = s
	if s == gateDropped {
		for _, c := range g.conns {
			c.Conn.Close()
		}
		g.conns = nil
	}
}

func (g *gate) silent() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state == gateSilent
}

type gatedConn struct {
	net.Conn
	g *gate
}

func (c *gatedConn) Write(p []byte) (int, error) {
	if c.g.silent() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *gatedConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if err != nil || !c.g.silent() {
			return n, err
		}
	}
}

// gatedConnect connects to the server in addr through a new gate with
// session timeout s, and waits for the session.
func gatedConnect(t *testing.T, addr string, s time.Duration) (*zk.Conn, *gate) {
	t.Helper()
	g := &gate{}
	conn, events, err := zk.Connect([]string{addr}, s, zk.WithDialer(g.dial), zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	return conn, g
}
