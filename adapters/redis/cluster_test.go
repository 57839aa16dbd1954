package redis_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	lockredis "github.com/locker-go/locker/adapters/redis"
	"github.com/locker-go/locker/conformance"
	"github.com/locker-go/locker/conformance/faultproxy"
	"github.com/locker-go/locker/internal/rediskey"
	"github.com/locker-go/locker/internal/testenv"
)

// clusterAddrs are the masters of the test cluster (scripts/backends).
func clusterAddrs(t testing.TB) []string {
	return strings.Split(testenv.URL(t, "LOCKER_TEST_REDIS_CLUSTER").Host, ",")
}

// clusterClient dials the cluster; with proxies, each node through its own
// (the addresses the cluster announces are mapped to them), so that a
// crash cuts the client off every master at once.
func clusterClient(t testing.TB, addrs []string, proxies map[string]*faultproxy.Proxy) *goredis.ClusterClient {
	c := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs: addrs, DialTimeout: time.Second,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if p := proxies[addr]; p != nil {
				addr = p.Addr()
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// clusterHarness is harness's, on the cluster: each lock in a slot of its
// own (the prefix has no hash tag).
func clusterHarness(t testing.TB, proxied bool) conformance.Harness {
	addrs := clusterAddrs(t)
	admin := clusterClient(t, addrs, nil)
	var crasher faultproxy.Crasher
	t.Cleanup(func() { _ = crasher.Close() })
	return conformance.Harness{
		NewLocker: func(context.Context) (locker.Locker, error) {
			proxies := map[string]*faultproxy.Proxy{}
			var ps []*faultproxy.Proxy
			for _, a := range addrs {
				if !proxied {
					break
				}
				p, err := crasher.Proxy(a)
				if err != nil {
					return nil, err
				}
				proxies[a], ps = p, append(ps, p)
			}
			l, err := lockredis.New(clusterClient(t, addrs, proxies), lockredis.WithPrefix(prefix))
			if err != nil {
				return nil, err
			}
			crasher.Track(l, ps...)
			return l, nil
		},
		Crash:     crasher.Crash,
		Hang:      crasher.Blackhole,
		Slow:      crasher.Delay,
		Count:     func(ctx context.Context, keyPrefix string) (int, error) { return clusterCount(ctx, admin, keyPrefix) },
		FIFO:      true,
		TTL:       time.Second,
		RoundTrip: func(ctx context.Context) error { return admin.Ping(ctx).Err() },
	}
}

// clusterCount is count, over every master: a lock's keys carry its tag,
// "{" and 8 hex digits and "}", before the key.
func clusterCount(ctx context.Context, admin *goredis.ClusterClient, keyPrefix string) (int, error) {
	var mu sync.Mutex
	n := 0
	err := admin.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
		for _, space := range []string{"", "t"} {
			pattern := func(kind string) string {
				return strings.TrimSuffix(rediskey.MatchPrefix(prefix+space+kind+":"), "*") + `\{????????\}` + rediskey.MatchPrefix(keyPrefix)
			}
			locks, err := c.Keys(ctx, pattern("lock")).Result()
			if err != nil {
				return err
			}
			queues, err := c.Keys(ctx, pattern("queue")).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			for _, l := range locks {
				for _, f := range c.HKeys(ctx, l).Val() {
					if strings.HasPrefix(f, "h") {
						n++
					}
				}
			}
			for _, q := range queues {
				n += int(c.ZCard(ctx, q).Val())
			}
			mu.Unlock()
		}
		return nil
	})
	return n, err
}

func TestConformanceCluster(t *testing.T) {
	conformance.Run(t, clusterHarness(t, true))
}

func BenchmarkConformanceCluster(b *testing.B) {
	conformance.Bench(b, clusterHarness(b, false))
}

// Locks spread over every master, each lock's keys in one slot; a URL
// opens the same layout.
func TestClusterSpreadsLocks(t *testing.T) {
	ctx := context.Background()
	u := testenv.URL(t, "LOCKER_TEST_REDIS_CLUSTER")
	pfx := "locker-test-spread-" + strings.ToLower(t.Name()) + ":"
	l, err := locker.Open(ctx, u.String()+"?prefix="+pfx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var leases []locker.Lease
	for i := range 30 {
		lease, err := l.Lock(ctx, fmt.Sprintf("k%d", i))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, lease)
	}
	admin := clusterClient(t, clusterAddrs(t), nil)
	var mu sync.Mutex
	masters := 0
	err = admin.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
		keys, err := c.Keys(ctx, rediskey.MatchPrefix(pfx)).Result()
		if len(keys) > 0 {
			mu.Lock()
			masters++
			mu.Unlock()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if masters < 3 {
		t.Errorf("30 locks on %d of 3 masters, want every one", masters)
	}
	infos, err := l.(locker.Admin).List(ctx, "k")
	if err != nil || len(infos) != 30 {
		t.Errorf("List: %d locks, %v; want 30", len(infos), err)
	}
	for _, lease := range leases {
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// On a slotted cluster a Locker's many kept-alive leases are renewed in a
// pipeline per tick, a round trip per master, which loads the script again
// where a master lost it: all stay held.
func TestClusterRenewals(t *testing.T) {
	calls := &lockredis.CommandCounter{}
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: clusterAddrs(t),
		NewClient: func(o *goredis.Options) *goredis.Client {
			n := goredis.NewClient(o)
			n.AddHook(calls)
			return n
		}})
	defer c.Close()
	lk, err := lockredis.New(c, lockredis.WithPrefix(prefix+t.Name()+":"))
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	const n = 100
	ttl := 300 * time.Millisecond
	if testenv.Race { // the detector's CPU on 2 cores delayed renewals past 2/3 of 300 ms (as SQL's twin found)
		ttl = time.Second
	}
	// Masters that lost their scripts (a restart) have the pipeline load
	// them again.
	flush := func() {
		if err := c.ForEachMaster(context.Background(), func(ctx context.Context, m *goredis.Client) error { return m.ScriptFlush(ctx).Err() }); err != nil {
			t.Fatal(err)
		}
	}
	used := testenv.KeepMany(t, lk, n, ttl, calls.Count, flush)
	t.Logf("%d leases kept alive 3×TTL on the cluster with %d commands", n, used)
}

// A master killed: the leases on its locks end by their Deadline, lost,
// while those on the others stay held; started again empty after a TTL, it
// grants the lost locks anew with fences above the lost leases' (its
// counters start from its clock).
func TestClusterMasterKilled(t *testing.T) {
	testenv.URL(t, "LOCKER_TEST_REDIS_CLUSTER") // -short skips; the cluster is our own
	c := testenv.StartRedisCluster(t)
	ctx := context.Background()
	l, err := locker.Open(ctx, c.URL("prefix=killed:"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const ttl = time.Second
	leases := make([]locker.Lease, 30)
	for i := range leases {
		if leases[i], err = l.Lock(ctx, fmt.Sprintf("k%d", i), locker.WithTTL(ttl)); err != nil {
			t.Fatal(err)
		}
	}
	c.Nodes[1].Kill()
	killed := time.Now()
	time.Sleep(3 * ttl) // the leases' renewals at work against a dead master
	var lost []locker.Lease
	for _, lease := range leases {
		select {
		case <-lease.Done():
			lost = append(lost, lease)
			if !errors.Is(lease.Err(), locker.ErrLeaseLost) {
				t.Errorf("%s: Err() = %v, want ErrLeaseLost", lease.Key(), lease.Err())
			}
			if late := lease.Deadline().Sub(killed); late > ttl+time.Second {
				t.Errorf("%s: Deadline %v after the kill, past a TTL", lease.Key(), late)
			}
		default:
		}
	}
	if len(lost) == 0 || len(lost) == len(leases) {
		t.Fatalf("%d of %d leases lost with one master of three", len(lost), len(leases))
	}
	c.Restart(1)
	for _, old := range lost {
		lease, err := l.TryLock(ctx, old.Key())
		if err != nil {
			t.Fatalf("%s after the restart: %v", old.Key(), err)
		}
		if lease.Fence() <= old.Fence() {
			t.Errorf("%s: fence %d after the restart, not above the lost lease's %d", old.Key(), lease.Fence(), old.Fence())
		}
		_ = lease.Unlock(ctx)
	}
}

// On a slotted cluster the waiters listen on their lock's shard channel:
// a release that hands a waiter the key reaches it there, and the waiter
// holds the key without a command of its own.
func TestClusterReleaseHandsOff(t *testing.T) {
	calls := &lockredis.CommandCounter{}
	checkHandOff(t, clusterPair(t, calls), calls, nil, nil)
}

// clusterPair is two Lockers on the test cluster, closed when t ends; the
// second's commands go through hook.
func clusterPair(t *testing.T, hook goredis.Hook, opts ...lockredis.Option) []locker.Locker {
	lockers := make([]locker.Locker, 2)
	for i := range lockers {
		o := &goredis.ClusterOptions{Addrs: clusterAddrs(t)}
		if i == 1 {
			o.NewClient = func(o *goredis.Options) *goredis.Client {
				n := goredis.NewClient(o)
				n.AddHook(hook)
				return n
			}
		}
		c := goredis.NewClusterClient(o)
		t.Cleanup(func() { c.Close() })
		var err error
		lockers[i], err = lockredis.New(c, append([]lockredis.Option{lockredis.WithPrefix(prefix + t.Name() + ":")}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lockers[i].Close() })
	}
	return lockers
}

// A Lock on a key whose shard subscription is still up after an earlier
// wait (driver.KeyListener) subscribes before its first attempt, which
// queues it: one acquire script per contended Lock, where a Lock that
// had to subscribe first made a refused attempt, then a queued one.
func TestClusterLingeringWaitQueuesAtOnce(t *testing.T) {
	scripts := &scriptCounter{}
	// An hour's linger: the second wait must find the first's subscription.
	lockers := clusterPair(t, scripts, lockredis.WithShardLinger(time.Hour))
	ctx := t.Context()
	// wait has lockers[1] wait for "k", held by lockers[0], and returns
	// how many scripts it ran until it was handed the key.
	wait := func() int64 {
		held, err := lockers[0].Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		before := scripts.n.Load()
		got := testenv.LockAsync(ctx, lockers[1], "k")
		for { // until the waiter is queued
			info, err := lockers[0].(locker.Admin).Status(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if info.Waiters == 1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		lease := testenv.Granted(t, "the waiter", got, 10*time.Second)
		// Counted now: the hand-off ran no script of the waiter's, and its
		// queued attempt's reply may be read after the server queued it.
		ran := scripts.n.Load() - before
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		return ran
	}
	if n := wait(); n != 2 {
		t.Errorf("a Lock on a key with no subscription ran %d scripts until queued, want 2 (refused, then queued)", n)
	}
	if n := wait(); n != 1 {
		t.Errorf("a Lock on a key whose subscription lingers ran %d scripts until queued, want 1", n)
	}
}

// scriptCounter is the go-redis hook that counts the scripts a client
// had run (an EVALSHA answered NOSCRIPT, then sent as EVAL, counts once).
type scriptCounter struct{ n atomic.Int64 }

func (c *scriptCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (c *scriptCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); (name == "evalsha" || name == "eval") && !goredis.HasErrorPrefix(err, "NOSCRIPT") {
			c.n.Add(1)
		}
		return err
	}
}
func (c *scriptCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}
