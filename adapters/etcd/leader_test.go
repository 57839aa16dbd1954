package etcd_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// leaderOf returns the index of c's leader.
func leaderOf(t *testing.T, endpoints []string) int {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i, ep := range endpoints {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cli.Status(ctx, ep)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return i
		}
	}
	t.Fatal("no member says it leads")
	return -1
}

// contention runs clients that take one key in turn, each holding it until
// a short hold ends or its lease does, and counts what must never happen:
// two holders at once, a fence not above the one before.
type contention struct {
	inside, overlaps, fenceBack atomic.Int32
	acquired                    atomic.Int64
	mu                          sync.Mutex
	last                        uint64
	firstAfter                  chan struct{} // closed at the first grant after arm
	armed                       atomic.Bool
	once                        sync.Once
	errs                        sync.Map      // error text -> count, for a failure message
	progress                    chan struct{} // a signal per grant, dropped when one is pending
}

// waitGrants waits until acquired reaches n, or fails t after d.
func (c *contention) waitGrants(t *testing.T, n int64, d time.Duration, what string) {
	t.Helper()
	timeout := time.After(d)
	for c.acquired.Load() < n {
		select {
		case <-c.progress:
		case <-timeout:
			c.errs.Range(func(k, v any) bool { t.Logf("%d× %s", v.(*atomic.Int32).Load(), k); return true })
			t.Fatalf("%s: %d grants of %d within %v", what, c.acquired.Load(), n, d)
		}
	}
}

func (c *contention) work(ctx context.Context, l locker.Locker, key string) {
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		lease, err := l.Lock(lctx, key)
		cancel()
		if err != nil {
			n, _ := c.errs.LoadOrStore(err.Error(), new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			continue // an election in progress: try again
		}
		if c.inside.Add(1) > 1 {
			c.overlaps.Add(1)
		}
		c.mu.Lock()
		if lease.Fence() <= c.last {
			c.fenceBack.Add(1)
		}
		c.last = lease.Fence()
		c.mu.Unlock()
		c.acquired.Add(1)
		select {
		case c.progress <- struct{}{}:
		default:
		}
		if c.armed.Load() {
			c.once.Do(func() { close(c.firstAfter) })
		}
		select {
		case <-time.After(2 * time.Millisecond): // the hold
		case <-lease.Done():
		}
		c.inside.Add(-1)
		if err := lease.Unlock(context.Background()); err != nil {
			n, _ := c.errs.LoadOrStore("Unlock: "+err.Error(), new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
		}
	}
}

// The leader of a 3-member cluster killed under contention: no two holders
// at once, no fence going back, and waiters go on once a new leader is
// elected.
func TestLeaderKilledUnderContention(t *testing.T) {
	testenv.URL(t, "LOCKER_TEST_ETCD") // -short skips; the cluster is our own
	cluster := testenv.StartEtcdCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &contention{firstAfter: make(chan struct{}), progress: make(chan struct{}, 1)}
	var wg sync.WaitGroup
	for range 4 {
		l, err := locker.Open(ctx, cluster.URL("/locker"))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		wg.Go(func() { c.work(ctx, l, "leader-kill") })
	}
	c.waitGrants(t, 50, 30*time.Second, "before the kill")
	leader := leaderOf(t, cluster.Endpoints)
	killed := time.Now()
	c.armed.Store(true)
	cluster.Kill(leader)
	select {
	case <-c.firstAfter:
		t.Logf("first grant %v after the leader was killed", time.Since(killed).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		c.waitGrants(t, c.acquired.Load()+1, 0, "after the leader's death") // fails, with the errors seen
	}
	c.waitGrants(t, c.acquired.Load()+50, 30*time.Second, "after the first grant past the kill") // they go on
	cancel()
	wg.Wait()
	if n := c.overlaps.Load(); n > 0 {
		t.Errorf("%d times two holders at once", n)
	}
	if n := c.fenceBack.Load(); n > 0 {
		t.Errorf("%d fences not above the one before", n)
	}
}
