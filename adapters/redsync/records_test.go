package redsync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/rediskey"
)

// prefixedLockers returns n Lockers over the shared masters under a
// prefix of the test's own, and the raw clients of the first.
func prefixedLockers(t *testing.T, n int) ([]*testLocker, []goredis.UniversalClient, string) {
	t.Helper()
	prefix := fmt.Sprintf("test:%s:%d:", t.Name(), time.Now().UnixNano())
	var (
		ls    []*testLocker
		first []goredis.UniversalClient
	)
	for range n {
		var clients []goredis.UniversalClient
		for _, a := range masterAddrs(t) {
			c := goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			clients = append(clients, c)
		}
		l, err := newTestLocker(clients, WithPrefix(prefix), WithNodeTimeout(suiteNodeTimeout))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Locker.Close() })
		ls = append(ls, l)
		if first == nil {
			first = clients
		}
	}
	return ls, first, prefix
}

// redisKeys lists the Redis keys under prefix on any master but the
// fence counter, which outlives every lock.
func redisKeys(t *testing.T, clients []goredis.UniversalClient, prefix string) []string {
	t.Helper()
	var all []string
	for i, c := range clients {
		keys, err := rediskey.Scan(context.Background(), c, rediskey.MatchPrefix(prefix))
		if err != nil {
			t.Fatalf("SCAN master %d: %v", i, err)
		}
		for _, k := range keys {
			if k != prefix+"fence" {
				all = append(all, fmt.Sprintf("master %d: %s", i, k))
			}
		}
	}
	return all
}

// liveOn lists key's live holders and marks on each master.
func liveOn(t *testing.T, l *testLocker, clients []goredis.UniversalClient, n name) [][]string {
	t.Helper()
	out := make([][]string, len(clients))
	for i, c := range clients {
		v, err := liveScript.Run(context.Background(), c, l.records(n)).StringSlice()
		if err != nil {
			t.Fatalf("master %d: %v", i, err)
		}
		out[i] = v
	}
	return out
}

// marksOn counts the waiting marks in live.
func marksOn(live []string) int {
	return len(slices.DeleteFunc(slices.Clone(live), func(e string) bool { return !strings.HasPrefix(e, "w") }))
}

// Whatever a key's locks leave on the masters goes with the last of them:
// exclusive, shared, re-entered, subtree, waited for, given up.
func TestRecordsVanish(t *testing.T) {
	ls, clients, prefix := prefixedLockers(t, 2)
	a, b := ls[0], ls[1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	take := func(l *testLocker, key string, opts ...locker.Option) locker.Lease {
		t.Helper()
		lease, err := l.Lock(ctx, key, opts...)
		if err != nil {
			t.Fatalf("Lock(%q, %v): %v", key, opts, err)
		}
		return lease
	}
	var leases []locker.Lease
	leases = append(leases, take(a, "x"), take(a, "s", locker.Shared()), take(b, "s", locker.Shared()))
	me := locker.WithOwner("me")
	leases = append(leases, take(a, "r", me), take(a, "r", me))
	leases = append(leases, take(a, "t/a/b", locker.Subtree()), take(b, "t/a/c", locker.Subtree(), locker.Shared()))

	// A waiter that gives up, and one that gets the key.
	short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := b.Lock(short, "x"); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("Lock of a held key until its ctx ends = %v, want ErrLocked", err)
	}
	stop()
	got := make(chan locker.Lease, 1)
	go func() { got <- take(b, "s") }()
	within(t, 10*time.Second, "the exclusive waiter marks its place", func() bool {
		return marksOn(liveOn(t, b, clients, name{driver.Plain, "s"})[0]) == 1
	})
	for _, l := range leases {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := (<-got).Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	a.bg.Wait()
	b.bg.Wait()
	if left := redisKeys(t, clients, prefix); len(left) > 0 {
		t.Errorf("Redis keys left once every lock was let go:\n%s", strings.Join(left, "\n"))
	}
}

// A waiting Lock's marks are on every master while it waits, and gone
// from every master once it gives up or gets the key.
func TestMarksLeaveWithTheWaiter(t *testing.T) {
	ls, clients, _ := prefixedLockers(t, 2)
	a, b := ls[0], ls[1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := name{driver.Plain, "k"}
	held, err := a.Lock(ctx, n.key, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	everywhere := func(want int) func() bool {
		return func() bool {
			for _, live := range liveOn(t, a, clients, n) {
				if marksOn(live) != want {
					return false
				}
			}
			return true
		}
	}

	short, stop := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := b.Lock(short, n.key)
		gaveUp <- err
	}()
	within(t, 10*time.Second, "the waiter's mark on every master", everywhere(1))
	stop()
	if err := <-gaveUp; !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("cancelled Lock = %v, want ErrLocked", err)
	}
	if !everywhere(0)() {
		t.Errorf("marks left once the Lock gave up: %v", liveOn(t, a, clients, n))
	}

	got := make(chan error, 1)
	go func() {
		lease, err := b.Lock(ctx, n.key)
		if err == nil {
			err = lease.Unlock(ctx)
		}
		got <- err
	}()
	within(t, 10*time.Second, "the second waiter's mark on every master", everywhere(1))
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	b.bg.Wait()
	if !everywhere(0)() {
		t.Errorf("marks left once the waiter got the key: %v", liveOn(t, a, clients, n))
	}
}
