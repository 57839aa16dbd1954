package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	lockredis "github.com/locker-go/locker/adapters/redis"
	"github.com/locker-go/locker/internal/testenv"
)

// One Locker's many kept-alive leases are renewed in batches: over three
// TTLs, 200 leases cost a few scripts per renewal period, not one per lease
// (alone, they would take 200 every TTL/3: 1,800).
func TestRenewalsBatched(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_REDIS")
	opt, err := goredis.ParseURL(u.String())
	if err != nil {
		t.Fatal(err)
	}
	client := goredis.NewClient(opt)
	defer client.Close()
	calls := &lockredis.CommandCounter{}
	client.AddHook(calls)
	lk, err := lockredis.New(client, lockredis.WithPrefix(prefix+t.Name()+":"))
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	const n, ttl = 200, 300 * time.Millisecond
	used := testenv.KeepMany(t, lk, n, ttl, calls.Count, nil)
	t.Logf("%d leases kept alive for 3×TTL with %d commands", n, used)
	if used >= n {
		t.Errorf("%d commands to keep %d leases alive for 3×TTL: renewals are not batched", used, n)
	}
}

// The last exclusive release of a key whose first waiter is exclusive
// hands it the key: the waiter holds it, with a fence above the last,
// without a script of its own.
func TestReleaseHandsOff(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_REDIS")
	opt, err := goredis.ParseURL(u.String())
	if err != nil {
		t.Fatal(err)
	}
	pfx := lockredis.WithPrefix(prefix + t.Name() + ":")
	var lockers [2]locker.Locker
	calls := &lockredis.CommandCounter{}
	for i := range lockers {
		c := goredis.NewClient(opt)
		defer c.Close()
		if i == 1 {
			c.AddHook(calls)
		}
		if lockers[i], err = lockredis.New(c, pfx); err != nil {
			t.Fatal(err)
		}
		defer lockers[i].Close()
	}
	checkHandOff(t, lockers, calls)
}

// checkHandOff: lockers[0] holds "k" while lockers[1] (whose client calls
// counts) waits for it; the release hands lockers[1] the key, which it
// takes without a command, fenced above.
func checkHandOff(t *testing.T, lockers [2]locker.Locker, calls *lockredis.CommandCounter) {
	t.Helper()
	ctx := context.Background()
	held, err := lockers[0].Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan locker.Lease, 1)
	go func() {
		l, err := lockers[1].Lock(ctx, "k")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
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
	before := calls.Count()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next := <-got
	if next == nil {
		t.FailNow()
	}
	defer next.Unlock(ctx)
	if n := calls.Count() - before; n != 0 {
		t.Errorf("the waiter sent %d commands to take a key handed to it (the last: %v), want none", n, calls.Last())
	}
	if next.Fence() <= held.Fence() {
		t.Errorf("fence %d after %d: not above", next.Fence(), held.Fence())
	}
	if left := time.Until(next.Deadline()); left <= 0 || left > locker.DefaultTTL {
		t.Errorf("handed lease's Deadline in %v, want within its TTL %v", left, locker.DefaultTTL)
	}
}
