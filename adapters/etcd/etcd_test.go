package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/adapters/etcd"
	"github.com/locker-go/locker/conformance"
	"github.com/locker-go/locker/conformance/faultproxy"
	"github.com/locker-go/locker/internal/testenv"
)

// backend is the test etcd: its first endpoint and the key namespace.
type backend struct {
	addr   string
	prefix string
}

func testBackend(t testing.TB) backend {
	u := testenv.URL(t, "LOCKER_TEST_ETCD")
	p := u.Path
	if p == "" || p == "/" {
		p = etcd.DefaultPrefix
	}
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return backend{addr: strings.Split(u.Host, ",")[0], prefix: p}
}

// client connects to addr quietly and is closed when the test ends.
func client(t testing.TB, addr string) *clientv3.Client {
	t.Helper()
	c, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dial connects to addr quietly.
func dial(addr string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
	})
}

// escape mirrors the adapter's key escaping, to count a prefix's entries.
var escape = strings.NewReplacer("%", "%25", "/", "%2F").Replace

// harness drives the test etcd. With proxied, each Locker's client goes
// through a proxy that Crash cuts; benchmarks connect directly, so that a
// lock's cost and the plain round trip are measured over the same path.
// Proxies and clients close when t ends; the suite closes the Lockers.
func harness(t testing.TB, proxied bool) conformance.Harness {
	b := testBackend(t)
	direct := client(t, b.addr)
	var crasher faultproxy.Crasher
	t.Cleanup(func() { _ = crasher.Close() })
	return conformance.Harness{
		NewLocker: func(context.Context) (locker.Locker, error) {
			addr := b.addr
			var p *faultproxy.Proxy
			if proxied {
				var err error
				if p, err = crasher.Proxy(b.addr); err != nil {
					return nil, err
				}
				addr = p.Addr()
			}
			c, err := dial(addr)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { c.Close() })
			l, err := etcd.New(c, etcd.WithPrefix(b.prefix), etcd.WithRequestTimeout(2*time.Second))
			if err != nil {
				return nil, err
			}
			crasher.Track(l, p)
			return l, nil
		},
		Crash: crasher.Crash,
		Hang:  crasher.Blackhole,
		Slow:  crasher.Delay,
		Count: func(ctx context.Context, prefix string) (int, error) {
			return countEntries(ctx, direct, b.prefix, prefix)
		},
		FIFO: true,
		TTL:  2 * time.Second, // etcd's least lease TTL with default election settings
		RoundTrip: func(ctx context.Context) error {
			_, err := direct.Get(ctx, b.prefix+"rtt")
			return err
		},
	}
}

// count is h.Count for a test, which it fails on an error.
func count(t testing.TB, h conformance.Harness, prefix string) int {
	t.Helper()
	n, err := h.Count(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestConformance(t *testing.T) {
	conformance.Run(t, harness(t, true))
}

func BenchmarkConformance(b *testing.B) {
	conformance.Bench(b, harness(b, false))
}

// testBackendURL is the test etcd's URL as a string, for locker.Open.
func testBackendURL(t testing.TB) string {
	return testenv.URL(t, "LOCKER_TEST_ETCD").String()
}

// The cluster of three members: every Locker knows them all (no proxy, so
// the crash and hang checks skip; the single-member suite runs them).
func TestConformanceCluster(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ETCD_CLUSTER")
	prefix := strings.TrimSuffix(u.Path, "/") + "/"
	direct, err := clientv3.New(clientv3.Config{
		Endpoints: strings.Split(u.Host, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	conformance.Run(t, conformance.Harness{
		NewLocker: func(ctx context.Context) (locker.Locker, error) { return locker.Open(ctx, u.String()) },
		Count:     func(ctx context.Context, p string) (int, error) { return countEntries(ctx, direct, prefix, p) },
		FIFO:      true,
		TTL:       2 * time.Second,
	})
}

// countEntries counts the queue entries of keys beginning with p, plain
// and subtree ("%T" begins the subtree space's, as in the adapter).
func countEntries(ctx context.Context, c *clientv3.Client, prefix, p string) (int, error) {
	n := 0
	for _, from := range []string{prefix + escape(p), prefix + "%T" + escape(p)} {
		resp, err := c.Get(ctx, from, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return 0, err
		}
		n += int(resp.Count)
	}
	return n, nil
}

// A TTL below a second, which etcd's leases (whole seconds) cannot
// honour, is refused with ErrInvalidTTL naming the least one, for Lock
// and LockAll, and nothing is written.
func TestRefusesTTLBelowASecond(t *testing.T) {
	h := harness(t, false)
	l, err := h.NewLocker(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := "ttl-" + strings.ReplaceAll(t.Name(), "/", "-") + "/"
	_, err = l.TryLock(t.Context(), p+"a", locker.WithTTL(500*time.Millisecond))
	if !errors.Is(err, locker.ErrInvalidTTL) || !strings.Contains(err.Error(), "1s") {
		t.Errorf("TryLock with a 500ms TTL: %v, want ErrInvalidTTL naming 1s", err)
	}
	_, err = locker.LockAll(t.Context(), l, []string{p + "b", p + "c"}, locker.WithTTL(999*time.Millisecond))
	if !errors.Is(err, locker.ErrInvalidTTL) {
		t.Errorf("LockAll with a 999ms TTL: %v, want ErrInvalidTTL", err)
	}
	if n := count(t, h, p); n != 0 {
		t.Errorf("%d entries left by refused calls", n)
	}
	lease, err := l.TryLock(t.Context(), p+"a", locker.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("TryLock with a 1s TTL: %v", err)
	}
	_ = lease.Unlock(t.Context())
}
