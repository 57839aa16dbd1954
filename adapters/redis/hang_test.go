package redis_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	lockredis "github.com/locker-go/locker/adapters/redis"
)

// Redis unreachable with its connection open (packets dropped): the
// holder's renewals hang, and Done must close by the lease's Deadline all
// the same, so that work stopped at Done never overlaps the next owner.
// Issue 13, defect 1: it closed about 3.7 s late.
func TestDoneByDeadlineWhileRedisHangs(t *testing.T) {
	p, client, opt := proxiedClient(t)
	l, err := lockredis.New(client, lockredis.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := "hang-" + rand.Text()
	ctx := context.Background()
	lease, err := l.Lock(ctx, key, locker.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	select {
	case <-lease.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done never closed while Redis hung")
	}
	// The timer fires at the deadline; the allowance is for a loaded
	// machine, far below the lateness this test was written for.
	if late := time.Since(lease.Deadline()); late > 250*time.Millisecond {
		t.Errorf("Done closed %v after the Deadline while Redis hung", late)
	}
	if !errors.Is(lease.Err(), locker.ErrLeaseLost) {
		t.Errorf("Err = %v, want ErrLeaseLost", lease.Err())
	}
	p.Resume()
	other, err := lockredis.New(goredis.NewClient(opt), lockredis.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second) // the TTL and then some
	defer cancel()
	next, err := other.Lock(wctx, key)
	if err != nil {
		t.Fatalf("the key did not come free after the hung holder's lease ended: %v", err)
	}
	if next.Fence() <= lease.Fence() {
		t.Errorf("fence %d after the lost lease is not above its %d", next.Fence(), lease.Fence())
	}
	_ = next.Unlock(ctx)
}
