package zookeeper_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/adapters/zookeeper"
	"github.com/locker-go/locker/conformance"
	"github.com/locker-go/locker/conformance/faultproxy"
	"github.com/locker-go/locker/internal/testenv"
)

// testTTL is the short TTL of the expiry tests. The Lockers are opened
// with the default URL: a lock with this TTL gets a session of its own,
// of the same timeout, through the Locker's proxy like all its sessions.
const testTTL = 2 * time.Second

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// rawConn is a plain connection for inspecting the server.
func rawConn(t testing.TB, u *url.URL) *zk.Conn { return rawConnDialing(t, u, nil) }

// rawConnDialing is rawConn through dial (nil: go-zookeeper's own).
func rawConnDialing(t testing.TB, u *url.URL, dial zk.Dialer) *zk.Conn {
	t.Helper()
	if dial == nil {
		dial = net.DialTimeout
	}
	conn, events, err := zk.Connect(strings.Split(u.Host, ","), 10*time.Second, zk.WithDialer(dial), zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	if u.User != nil {
		pass, _ := u.User.Password()
		if err := conn.AddAuth("digest", []byte(u.User.Username()+":"+pass)); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

func root(u *url.URL) string {
	if u.Path == "" || u.Path == "/" {
		return zookeeper.DefaultRoot
	}
	return u.Path
}

// harness drives the servers in u. With proxied, each Locker talks through
// its own faultproxy (to u's first server), so Crash and Hang can cut it
// off; without, Lockers dial every server of u, and those checks skip. The
// proxies close when t ends; the suite closes the Lockers, which stops a
// crashed one's goroutines.
func harness(t testing.TB, u *url.URL, proxied bool) conformance.Harness {
	raw := rawConn(t, u)
	var crasher faultproxy.Crasher
	t.Cleanup(func() { _ = crasher.Close() })
	h := conformance.Harness{
		NewLocker: func(ctx context.Context) (locker.Locker, error) {
			lu := *u
			var p *faultproxy.Proxy
			if proxied {
				var err error
				if p, err = crasher.Proxy(strings.Split(u.Host, ",")[0]); err != nil {
					return nil, err
				}
				lu.Host = p.Addr()
			}
			l, err := locker.Open(ctx, lu.String())
			if err != nil {
				return nil, err
			}
			crasher.Track(l, p)
			return l, nil
		},
		Count: func(_ context.Context, prefix string) (int, error) {
			return countNodes(raw, root(u), prefix)
		},
		FIFO: true,
		TTL:  testTTL,
		RoundTrip: func(ctx context.Context) error {
			_, _, err := raw.Exists("/")
			return err
		},
	}
	if proxied {
		h.Crash, h.Hang, h.Slow = crasher.Crash, crasher.Blackhole, crasher.Delay
	}
	return h
}

// count is countNodes for a test, which it fails on an error.
func count(t testing.TB, conn *zk.Conn, root, prefix string) int {
	t.Helper()
	n, err := countNodes(conn, root, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// countNodes returns the lock nodes of the keys beginning with prefix, plus
// one for each such key's node that is left without lock nodes (a leak).
func countNodes(conn *zk.Conn, root, prefix string) (int, error) {
	// In an ensemble, conn's server may lag the leader: catch up first.
	if _, err := conn.Sync(root); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return 0, err
	}
	keys, _, err := conn.Children(root)
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		// Subtree key nodes begin with "%T", as in the adapter.
		if !strings.HasPrefix(k, zookeeper.Escape(prefix)) && !strings.HasPrefix(k, "%T"+zookeeper.Escape(prefix)) {
			continue
		}
		children, _, err := conn.Children(root + "/" + k)
		switch {
		case errors.Is(err, zk.ErrNoNode): // reaped meanwhile
		case err != nil:
			return 0, err
		default:
			n += max(1, len(children))
		}
	}
	return n, nil
}

func TestConformance(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	conformance.Run(t, harness(t, u, true))
}

// The ensemble of three servers: every Locker knows them all.
func TestConformanceEnsemble(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK_ENSEMBLE")
	conformance.Run(t, harness(t, u, false))
}

func BenchmarkConformance(b *testing.B) {
	u := testenv.URL(b, "LOCKER_TEST_ZK")
	conformance.Bench(b, harness(b, u, false))
}
