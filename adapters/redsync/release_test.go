package redsync

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// countedMasters starts five masters of the test's own and a Locker over
// them whose clients count the scripts they send.
func countedMasters(t *testing.T) ([]*testenv.RedisServer, *testLocker, []*scriptCounter, []goredis.UniversalClient) {
	t.Helper()
	testenv.URL(t, "LOCKER_TEST_REDLOCK") // -short skips; the same binary serves both
	var (
		servers  []*testenv.RedisServer
		clients  []goredis.UniversalClient
		counters []*scriptCounter
	)
	for range 5 {
		s := testenv.StartRedis(t, 0)
		servers = append(servers, s)
		// Idle connections ready in the pool, as a busy client has: a
		// retry then reaches a slow master at once instead of stalling
		// in a new connection's handshake.
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, MaxRetries: -1,
			MinIdleConns: 10, PoolSize: 20})
		sc := &scriptCounter{}
		c.AddHook(sc)
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
		counters = append(counters, sc)
	}
	l, err := newTestLocker(clients, WithNodeTimeout(faultNodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Locker.Close() })
	// Load every script on every master, so that a script queued on a
	// stopped master runs when it resumes instead of failing NOSCRIPT.
	ctx := context.Background()
	for _, c := range clients {
		for _, s := range []*goredis.Script{acquireScript, claimScript, releaseScript, unmarkScript, forceScript, statusScript} {
			if err := s.Load(ctx, c).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return servers, l, counters, clients
}

// warm opens and initialises a few connections to every master (the
// concurrent blocking pops hold one each), so that the scripts sent to a
// stopped master are queued there rather than stuck in the handshake of
// a new connection: a busy client has such connections in its pool.
func warm(l *testLocker) {
	var wg sync.WaitGroup
	for _, m := range l.masters {
		for range 8 {
			wg.Go(func() { m.client.BLPop(context.Background(), 50*time.Millisecond, "nokey") })
		}
	}
	wg.Wait()
}

// stopped runs fn with the given masters stopped, waits for the Locker's
// background retries, resumes them and waits until they have run every
// script the Locker sent them meanwhile.
func stopped(t *testing.T, l *testLocker, servers []*testenv.RedisServer, counters []*scriptCounter, which []int, fn func()) {
	t.Helper()
	warm(l)
	base := map[int]int64{}
	for _, i := range which {
		base[i] = scriptsRun(t, servers[i].Addr) - counters[i].n.Load()
		servers[i].Stop()
	}
	fn()
	l.bg.Wait()
	for _, i := range which {
		servers[i].Cont()
	}
	for _, i := range which {
		within(t, 10*time.Second, "stopped master runs its queued scripts", func() bool {
			return scriptsRun(t, servers[i].Addr)-counters[i].n.Load() == base[i]
		})
	}
}

// A release retried on slow masters must not drop a hold twice, nor a
// newer hold of the same owner; the undo of a failed re-entry must take
// back the hold it added even where the master did not answer (item 2).
func TestReleaseRetriesAreIdempotent(t *testing.T) {
	servers, l, counters, clients := countedMasters(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wantHolds := func(t *testing.T, key, owner string, holds int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for i := 0; i < len(clients); {
			switch o, n, _ := masterRecord(t, l, clients[i], key); {
			case o == owner && n == holds:
				i++
			case time.Now().After(deadline):
				t.Errorf("master %d: record of %q is owner %q with %d holds; want %q with %d", i, key, o, n, owner, holds)
				i++
			default: // a call ends once a quorum decided it: the others' replies land a little later
				time.Sleep(time.Millisecond)
			}
		}
	}

	t.Run("second hold survives the retried release of the first", func(t *testing.T) {
		key, owner := uniqueKey(t, "k"), "o1"
		first, err := l.Lock(ctx, key, locker.WithOwner(owner))
		if err != nil {
			t.Fatal(err)
		}
		second, err := l.Lock(ctx, key, locker.WithOwner(owner))
		if err != nil {
			t.Fatal(err)
		}
		stopped(t, l, servers, counters, []int{0, 1}, func() {
			if err := second.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
		wantHolds(t, key, owner, 1)
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wantHolds(t, key, "", 0)
	})

	t.Run("a new hold survives the retried release of the old", func(t *testing.T) {
		key, owner := uniqueKey(t, "k"), "o2"
		old, err := l.Lock(ctx, key, locker.WithOwner(owner))
		if err != nil {
			t.Fatal(err)
		}
		var renewed locker.Lease
		stopped(t, l, servers, counters, []int{0, 1}, func() {
			if err := old.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if renewed, err = l.Lock(ctx, key, locker.WithOwner(owner)); err != nil {
				t.Fatal(err)
			}
		})
		wantHolds(t, key, owner, 1)
		if err := renewed.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wantHolds(t, key, "", 0)
	})

	t.Run("a failed re-entry is undone where it landed late", func(t *testing.T) {
		key, owner := uniqueKey(t, "k"), "o3"
		held, err := l.Lock(ctx, key, locker.WithOwner(owner), locker.WithTTL(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		stopped(t, l, servers, counters, []int{0, 1, 2}, func() {
			if _, err := l.TryLock(ctx, key, locker.WithOwner(owner)); !errors.Is(err, locker.ErrUnavailable) {
				t.Fatalf("re-entry with 3 of 5 masters stopped = %v, want ErrUnavailable", err)
			}
		})
		wantHolds(t, key, owner, 1)
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wantHolds(t, key, "", 0)
	})
}
