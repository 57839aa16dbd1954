package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	lockredis "github.com/locker-go/locker/adapters/redis"
	"github.com/locker-go/locker/internal/testenv"
)

// A Redis that restarts without persistence comes back without the fence
// counter; fences must not go back all the same (issue 13, defect 8): a
// missing counter starts from the server's clock.
func TestFenceNeverGoesBackAfterARestartWithoutData(t *testing.T) {
	testenv.URL(t, "LOCKER_TEST_REDIS") // -short skips; the server is our own
	srv := testenv.StartRedis(t, 0)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer client.Close()
	l, err := lockredis.New(client)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last uint64
	for i := range 3 {
		lease, err := l.Lock(ctx, "restart")
		if err != nil {
			t.Fatalf("Lock %d: %v", i, err)
		}
		if f := lease.Fence(); f <= last {
			t.Fatalf("fence %d after restart %d is not above %d before it", f, i, last)
		} else {
			last = f
		}
		_ = lease.Unlock(ctx)
		srv.Kill()
		srv = testenv.StartRedis(t, srv.Port()) // empty: no counter, no locks
	}
}

// Redis killed (SIGKILL) under contention and started again on its
// append-only file, fsynced at every write (a lock server's durable
// setting): no two holders at once, no fence going back, and the waiters go
// on once it answers again. (Without persistence a restart loses the
// holder's key: see the package documentation.)
func TestKilledAndRestartedUnderContention(t *testing.T) {
	testenv.URL(t, "LOCKER_TEST_REDIS") // -short skips; the server is our own
	srv := testenv.StartRedisAOF(t)
	testenv.KillUnderContention(t, "redis://"+srv.Addr, srv.Restart)
}
