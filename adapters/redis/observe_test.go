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

// An observer outlives a Redis that is killed and comes back empty: its
// subscription is made again, so the next leader's announcement reaches
// it well before its 10 s safety read, and the old leader's lease ends.
func TestObserveAcrossARestart(t *testing.T) {
	testenv.URL(t, "LOCKER_TEST_REDIS") // -short skips; the server is our own
	srv := testenv.StartRedis(t, 0)
	newLocker := func() locker.Locker {
		c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		l, err := lockredis.New(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b, obs := newLocker(), newLocker(), newLocker()
	old, err := locker.Campaign(ctx, a, "e", locker.WithTTL(time.Second), locker.WithLabel("a"))
	if err != nil {
		t.Fatal(err)
	}
	seen := locker.Observe(ctx, obs, "e")
	if l := <-seen; l.Label != "a" || l.Fence != old.Fence() {
		t.Fatalf("first observation %+v; want a's term %d", l, old.Fence())
	}
	srv.Kill()
	srv = testenv.StartRedis(t, srv.Port()) // empty: no leader, no counter
	select {
	case <-old.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the old leader's lease did not end within 5s of the restart")
	}
	lead, err := locker.Campaign(ctx, b, "e", locker.WithLabel("b"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case l := <-seen:
			if l.Label == "b" && l.Fence == lead.Fence() {
				return
			}
			if l.Fence != 0 {
				t.Fatalf("observed %+v; want no leader or b's term %d", l, lead.Fence())
			}
		case <-deadline:
			t.Fatal("the observer did not see the new leader within 5s of its campaign: its subscription was not made again")
		}
	}
}
