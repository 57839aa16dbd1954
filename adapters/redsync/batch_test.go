package redsync

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// countedLocker is a Locker over the shared masters under a prefix of the
// test's own, whose clients count the scripts they send.
func countedLocker(t *testing.T) (*testLocker, []goredis.UniversalClient, []*scriptCounter) {
	t.Helper()
	var (
		clients  []goredis.UniversalClient
		counters []*scriptCounter
	)
	for _, a := range masterAddrs(t) {
		c := goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true})
		sc := &scriptCounter{}
		c.AddHook(sc)
		t.Cleanup(func() { _ = c.Close() })
		clients, counters = append(clients, c), append(counters, sc)
	}
	prefix := fmt.Sprintf("test:%s:%d:", t.Name(), time.Now().UnixNano())
	l, err := newTestLocker(clients, WithPrefix(prefix), WithNodeTimeout(suiteNodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Locker.Close() })
	return l, clients, counters
}

// scripts is how many scripts each master was sent by fn (one per round
// to each; none in the background: they are waited for).
func scripts(l *testLocker, counters []*scriptCounter, fn func()) int64 {
	l.bg.Wait()
	before := counters[0].n.Load()
	fn()
	l.bg.Wait()
	return counters[0].n.Load() - before
}

// LockAll and a subtree lock take their keys in one script per master,
// and a subtree lock lets them go in one (once the Locker has seen the masters' fence counters: its first grant
// may bring a lagging one up to the others, in a second round).
func TestBatchIsOneRound(t *testing.T) {
	l, _, counters := countedLocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first, err := l.Lock(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	_ = first.Unlock(ctx)
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	var leases []locker.Lease
	if n := scripts(l, counters, func() {
		var err error
		if leases, err = locker.LockAll(ctx, l.Locker, keys); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Errorf("LockAll of 10 free keys sent each master %d scripts, want 1", n)
	}
	for _, lease := range leases {
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var tree locker.Lease
	if n := scripts(l, counters, func() {
		var err error
		if tree, err = l.Lock(ctx, "a/b/c/d/e", locker.Subtree()); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Errorf("a subtree lock at depth 5 sent each master %d scripts, want 1", n)
	}
	if n := scripts(l, counters, func() {
		if err := tree.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Errorf("the unlock of a subtree lock at depth 5 sent each master %d scripts, want 1", n)
	}
}

// holdOn makes owner an exclusive holder of key on the given masters only.
func holdOn(t *testing.T, l *testLocker, clients []goredis.UniversalClient, key, owner string, masters ...int) {
	t.Helper()
	n := name{driver.Plain, key}
	keys := append([]string{l.counterKey()}, l.records(n)...)
	for _, i := range masters {
		v, err := acquireScript.Run(context.Background(), clients[i], keys, 1, owner, 0, 60000, "77", false,
			notQueued, "call-"+owner, 0, conflicting[driver.Exclusive], 0, "").Int64Slice()
		if err != nil || v[0] != granted {
			t.Fatalf("master %d: %v, %v", i, v, err)
		}
	}
}

// A batch is granted where a quorum of masters granted all of it, and
// taken back wherever it landed when not.
func TestBatchQuorum(t *testing.T) {
	l, clients, _ := countedLocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys := []string{"a", "b", "c"}
	holdOn(t, l, clients, "b", "minority", 0, 1)
	leases, err := locker.TryLockAll(ctx, l.Locker, keys)
	if err != nil {
		t.Fatalf("TryLockAll with one key held on 2 of 5 masters: %v", err)
	}
	for _, lease := range leases {
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	holdOn(t, l, clients, "c", "majority", 2, 3, 4)
	if leases, err := locker.TryLockAll(ctx, l.Locker, keys); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryLockAll with one key held on 3 of 5 masters = %v, %v; want ErrLocked", leases, err)
	}
	l.bg.Wait()
	for _, k := range []string{"a", "b"} {
		for i, live := range liveOn(t, l, clients, name{driver.Plain, k}) {
			if want := 0; k == "b" && i < 2 {
				if len(live) != 1 {
					t.Errorf("master %d: %q holds %v, want the minority's holder alone", i, k, live)
				}
			} else if len(live) != want {
				t.Errorf("master %d: %q holds %v after the refused batch, want nothing", i, k, live)
			}
		}
	}
}
