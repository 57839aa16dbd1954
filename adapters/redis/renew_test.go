package redis_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	lockredis "github.com/locker-go/locker/adapters/redis"
	"github.com/locker-go/locker/internal/testenv"
)

// counting counts the commands a client sends.
type counting struct {
	n    atomic.Int64
	last atomic.Value
}

func (c *counting) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (c *counting) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.n.Add(1)
		c.last.Store(fmt.Sprint(cmd.Args()))
		return next(ctx, cmd)
	}
}
func (c *counting) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

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
	calls := &counting{}
	client.AddHook(calls)
	lk, err := lockredis.New(client, lockredis.WithPrefix(prefix+t.Name()+":"))
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	const n, ttl = 200, 300 * time.Millisecond
	leases := make([]locker.Lease, n)
	for i := range leases {
		if leases[i], err = lk.TryLock(context.Background(), fmt.Sprint(i), locker.WithTTL(ttl)); err != nil {
			t.Fatal(err)
		}
	}
	before := calls.n.Load()
	time.Sleep(3 * ttl) // the keep-alive at work is what is measured
	used := calls.n.Load() - before
	for _, l := range leases {
		if l.Err() != nil {
			t.Fatalf("lease %s ended: %v", l.Key(), l.Err())
		}
	}
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
	ctx := context.Background()
	pfx := lockredis.WithPrefix(prefix + t.Name() + ":")
	var lockers [2]locker.Locker
	calls := &counting{}
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
	before := calls.n.Load()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next := <-got
	if next == nil {
		t.FailNow()
	}
	defer next.Unlock(ctx)
	if n := calls.n.Load() - before; n != 0 {
		t.Errorf("the waiter sent %d commands to take a key handed to it (the last: %v), want none", n, calls.last.Load())
	}
	if next.Fence() <= held.Fence() {
		t.Errorf("fence %d after %d: not above", next.Fence(), held.Fence())
	}
	if left := time.Until(next.Deadline()); left <= 0 || left > locker.DefaultTTL {
		t.Errorf("handed lease's Deadline in %v, want within its TTL %v", left, locker.DefaultTTL)
	}
}
