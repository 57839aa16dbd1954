package redis_test

import (
	"context"
	"crypto/rand"
	"log/slog"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	lockredis "github.com/locker-go/locker/adapters/redis"
	"github.com/locker-go/locker/internal/testenv"
)

// WithLogger reaches the driver: a pub/sub connection cut and made again
// is logged (Info), and waiters go on hearing releases through it.
func TestLogsResubscribe(t *testing.T) {
	t.Parallel()
	p, client, opt := proxiedClient(t)
	lg, logs := testenv.NewLogs()
	l, err := lockredis.New(client, lockredis.WithPrefix(prefix), lockredis.WithLogger(lg))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	direct := goredis.NewClient(opt)
	defer direct.Close()
	other, err := lockredis.New(direct, lockredis.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	key := "logs-" + rand.Text()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A wait through l subscribes its channel, kept until Close.
	waitBehind := func() {
		t.Helper()
		held, err := other.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got := testenv.LockInTurn(ctx, l, key)
		waitQueued(t, ctx, other, key)
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("the waiter through the proxy: %v", err)
		}
	}
	waitBehind()
	p.Drop()
	r := logs.Wait(t, 15*time.Second, slog.LevelInfo, "subscribed again")
	t.Logf("logged: %s", r.Message)
	waitBehind() // and waits are still woken
}

// waitQueued waits until key has a waiter, as other's Status tells.
func waitQueued(t *testing.T, ctx context.Context, other locker.Locker, key string) {
	t.Helper()
	for {
		info, err := other.(locker.Admin).Status(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no waiter queued")
		case <-time.After(5 * time.Millisecond): // polling a condition: Status has no watch
		}
	}
}
