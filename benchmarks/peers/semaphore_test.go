package peers

import (
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance"
	"github.com/locker-go/locker/internal/testenv"
)

// Semaphores on Redis: 8 workers share a Limit(3) key, each holding a slot
// 1 ms per acquisition. Ours is locker.Limit(3) over redis://; the peer
// is the plain recipe (Redisson's RPermitExpirableSemaphore keeps its
// holders so): holders in a sorted set scored by expiry, taken by one
// script that drops the lapsed and adds the caller while fewer than n
// hold, polled every 10 ms while full, released by ZREM.

const (
	semWorkers = 8
	semLimit   = 3
	semHold    = time.Millisecond
)

// semScript takes a slot of KEYS[1] for ARGV[1] until ARGV[3] (ms, server
// clock) while fewer than ARGV[2] hold it: 1 if taken, else 0.
var semScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  return 1
end
return 0`)

// sortedSetSemaphore is the peer recipe on its own client.
func sortedSetSemaphore(addr string) locker.Locker {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	return shim{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			key, id := prefix+"sem:"+key, rand.Text()
			for {
				ok, err := semScript.Run(ctx, c, []string{key}, id, semLimit, ttl.Milliseconds()).Int()
				if err != nil {
					return nil, err
				}
				if ok == 1 {
					return func(ctx context.Context) error { return c.ZRem(ctx, key, id).Err() }, nil
				}
				select {
				case <-time.After(10 * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		},
		close: c.Close,
	}
}

// BenchmarkSemaphore reports ops/s (acquisitions per second) and the p50
// and p99 wait per acquisition: on Redis, ours and the peer recipe; on
// every other backend, ours alone (on Redlock a Limited grant needs more
// than a majority: 4 of 5 masters for a Limit(3)), and on Postgres and
// MySQL each worker's Locker on a pool of its own too (ours-apart: as
// processes of their own).
func BenchmarkSemaphore(b *testing.B) {
	u := testenv.URL(b, "LOCKER_TEST_REDIS")
	sqlite := "sqlite://" + filepath.ToSlash(filepath.Join(b.TempDir(), "semaphore.db"))
	for _, s := range []struct {
		name string
		open func() locker.Locker
	}{
		{"Redis/ours", func() locker.Locker { return ours(u.String()).newLocker(b) }},
		{"Redis/sorted-set", func() locker.Locker { return sortedSetSemaphore(u.Host) }},
		{"Redlock/ours", oursAt(b, "LOCKER_TEST_REDLOCK")},
		{"Etcd/ours", oursAt(b, "LOCKER_TEST_ETCD")},
		{"ZooKeeper/ours", oursAt(b, "LOCKER_TEST_ZK")},
		{"Postgres/ours", oursAt(b, "LOCKER_TEST_POSTGRES")},
		{"Postgres/ours-apart", func() locker.Locker { return pgOursApart(b, testenv.URL(b, "LOCKER_TEST_POSTGRES")) }},
		{"MySQL/ours", oursAt(b, "LOCKER_TEST_MYSQL")},
		{"MySQL/ours-apart", func() locker.Locker { return oursApart(b, testenv.URL(b, "LOCKER_TEST_MYSQL")) }},
		{"SQLite/ours", func() locker.Locker { return ours(sqlite).newLocker(b) }},
	} {
		b.Run(s.name, func(b *testing.B) {
			ls := make([]locker.Locker, semWorkers)
			for i := range ls {
				ls[i] = s.open()
				defer ls[i].Close()
			}
			contendSemaphore(b, ls, fmt.Sprintf("sem-%d", time.Now().UnixNano()))
		})
	}
}

// oursAt opens our adapter on the test server named by env, a client per
// call.
func oursAt(b *testing.B, env string) func() locker.Locker {
	u := testenv.URL(b, env)
	return func() locker.Locker { return ours(u.String()).newLocker(b) }
}

// contendSemaphore has each of ls take key's slots b.N times in all.
func contendSemaphore(b *testing.B, ls []locker.Locker, key string) {
	ctx := context.Background()
	var (
		mu    sync.Mutex
		waits []time.Duration
		wg    sync.WaitGroup
	)
	per := max(b.N/len(ls), 1)
	b.ResetTimer()
	start := time.Now()
	for _, l := range ls {
		wg.Go(func() {
			for range per {
				t := time.Now()
				lease, err := l.Lock(ctx, key, locker.Limit(semLimit))
				if err != nil {
					b.Error(err)
					return
				}
				w := time.Since(t)
				conformance.HoldFor(semHold) // as the locks' workloads hold
				_ = lease.Unlock(ctx)
				mu.Lock()
				waits = append(waits, w)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(waits)
	if len(waits) == 0 {
		return
	}
	b.ReportMetric(float64(len(waits))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(waits[len(waits)/2].Microseconds())/1000, "p50-wait-ms")
	b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "p99-wait-ms")
}
