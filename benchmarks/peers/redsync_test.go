package peers

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
)

// redsyncClient is a redsync over its own go-redis v9 client of each master,
// with redsync's default retry (32 tries, 50-250 ms apart).
func redsyncClient(_ testing.TB, addrs []string) locker.Locker {
	clients := make([]*goredis.Client, len(addrs))
	pools := make([]redis.Pool, len(addrs))
	for i, a := range addrs {
		clients[i] = goredis.NewClient(&goredis.Options{Addr: a})
		pools[i] = rsgoredis.NewPool(clients[i])
	}
	rs := redsync.New(pools...)
	return shim{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			m := rs.NewMutex(prefix+key, redsync.WithExpiry(ttl))
			// Lock is blocking in this workload: when redsync's tries run out
			// while others hold the key, keep waiting as a caller would.
			for {
				err := m.LockContext(ctx)
				if err == nil {
					break
				}
				if ctx.Err() != nil || !taken(err) {
					return nil, err
				}
			}
			return func(ctx context.Context) error {
				ok, err := m.UnlockContext(ctx)
				if err == nil && !ok {
					err = fmt.Errorf("redsync: unlock found no quorum: %w", locker.ErrNotHeld)
				}
				return err
			}, nil
		},
		close: func() error {
			var errs []error
			for _, c := range clients {
				errs = append(errs, c.Close())
			}
			return errors.Join(errs...)
		},
	}
}

// taken reports whether LockContext gave up because the key was held, not
// because a master failed.
func taken(err error) bool {
	var all *redsync.ErrTaken
	var one *redsync.ErrNodeTaken
	return errors.Is(err, redsync.ErrFailed) || errors.As(err, &all) || errors.As(err, &one)
}
