package zookeeper_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker/conformance/faultproxy"
	"github.com/locker-go/locker/internal/testenv"
)

// proxied returns a faultproxy to u's first server, closed when t ends,
// and u through it with a pinned 2s session.
func proxied(t *testing.T, u *url.URL) (*faultproxy.Proxy, *url.URL) {
	t.Helper()
	p, err := faultproxy.New(strings.Split(u.Host, ",")[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	pu := *u
	pu.Host, pu.RawQuery = p.Addr(), "session_timeout=2s"
	return p, &pu
}

// After a partition heals, the first Lock waits for the client to be back
// rather than failing at once (issue 13, defect 7).
func TestFirstLockAfterAPartitionHeals(t *testing.T) {
	p, pu := proxied(t, testenv.URL(t, "LOCKER_TEST_ZK"))
	l := open(t, pu)
	key := uniq(t) + "k"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	_ = first.Unlock(ctx)
	for _, partition := range []time.Duration{time.Second, 4 * time.Second} { // within, then past the session timeout
		p.Blackhole()
		time.Sleep(partition) // the partition's length is the condition under test
		p.Resume()
		lease, err := l.Lock(ctx, key)
		if err != nil {
			t.Fatalf("first Lock after a %v partition healed: %v", partition, err)
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatalf("Unlock after a %v partition: %v", partition, err)
		}
	}
}
