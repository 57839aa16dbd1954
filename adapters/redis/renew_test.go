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
	const n = 200
	ttl := 300 * time.Millisecond
	if testenv.Race { // the detector's CPU on 2 cores delayed renewals past 2/3 of 300 ms (as SQL's twin found)
		ttl = time.Second
	}
	used := testenv.KeepMany(t, lk, n, ttl, calls.Count, nil)
	t.Logf("%d leases kept alive for 3×TTL with %d commands", n, used)
	if used >= n {
		t.Errorf("%d commands to keep %d leases alive for 3×TTL: renewals are not batched", used, n)
	}
}

// A release that lets the key go hands it to the waiters it admits: they
// hold it, each with a fence above the last, without a script of their
// own. An exclusive release hands it to an exclusive waiter first, or to
// the readers at the head; the last reader's release to a writer.
func TestReleaseHandsOff(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_REDIS")
	opt, err := goredis.ParseURL(u.String())
	if err != nil {
		t.Fatal(err)
	}
	shared := []locker.Option{locker.Shared()}
	for _, c := range []struct {
		name       string
		hold, wait []locker.Option
		waiters    int
	}{
		{"writer to writer", nil, nil, 1},
		{"writer to readers", nil, shared, 3},
		{"reader to writer", shared, nil, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			pfx := lockredis.WithPrefix(prefix + t.Name() + ":")
			lockers := make([]locker.Locker, 1+c.waiters)
			calls := &lockredis.CommandCounter{}
			for i := range lockers {
				cl := goredis.NewClient(opt)
				defer cl.Close()
				if i > 0 {
					cl.AddHook(calls)
				}
				if lockers[i], err = lockredis.New(cl, pfx); err != nil {
					t.Fatal(err)
				}
				defer lockers[i].Close()
			}
			checkHandOff(t, lockers, calls, c.hold, c.wait)
		})
	}
}

// checkHandOff: lockers[0] holds "k" (with options hold) while the others
// (whose clients calls counts) wait for it (with options wait); the
// release hands each of them the key, which they take without a command,
// fenced above.
func checkHandOff(t *testing.T, lockers []locker.Locker, calls *lockredis.CommandCounter, hold, wait []locker.Option) {
	t.Helper()
	ctx := context.Background()
	held, err := lockers[0].Lock(ctx, "k", hold...)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan locker.Lease, len(lockers)-1)
	for _, l := range lockers[1:] {
		go func() {
			lease, err := l.Lock(ctx, "k", wait...)
			if err != nil {
				t.Error(err)
			}
			got <- lease
		}()
	}
	for { // until the waiters are queued
		info, err := lockers[0].(locker.Admin).Status(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == len(lockers)-1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	before := calls.Count()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	fences := map[uint64]bool{}
	for range lockers[1:] {
		next := <-got
		if next == nil {
			t.FailNow()
		}
		defer next.Unlock(ctx)
		if next.Fence() <= held.Fence() || fences[next.Fence()] {
			t.Errorf("fence %d after %d (and %v): not above, or not its own", next.Fence(), held.Fence(), fences)
		}
		fences[next.Fence()] = true
		if left := time.Until(next.Deadline()); left <= 0 || left > locker.DefaultTTL {
			t.Errorf("handed lease's Deadline in %v, want within its TTL %v", left, locker.DefaultTTL)
		}
	}
	if n := calls.Count() - before; n != 0 {
		t.Errorf("the waiters sent %d commands to take a key handed to them (the last: %v), want none", n, calls.Last())
	}
}
