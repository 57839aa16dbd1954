package zookeeper_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker/conformance/faultproxy"
	"github.com/locker-go/locker/internal/testenv"
)

// After a partition heals, the first Lock waits for the client to be back
// rather than failing at once (issue 13, defect 7).
func TestFirstLockAfterAPartitionHeals(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	p, err := faultproxy.New(strings.Split(u.Host, ",")[0])
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pu := *u
	pu.Host, pu.RawQuery = p.Addr(), "session_timeout=2s"
	l := open(t, &pu)
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
