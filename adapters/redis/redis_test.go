package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	lockredis "github.com/locker-go/locker/adapters/redis"
	"github.com/locker-go/locker/conformance"
	"github.com/locker-go/locker/conformance/faultproxy"
	"github.com/locker-go/locker/internal/rediskey"
	"github.com/locker-go/locker/internal/testenv"
)

const prefix = "locker-test:"

func init() { goredis.SetLogger(quiet{}) } // crashed clients' redial noise

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// harness gives each Locker its own client, dialled through a proxy that
// Crash cuts: the holder vanishes without releasing anything. Benchmarks
// dial directly (proxied false), to compare with a direct round trip.
// Proxies and clients are closed when t ends; the suite closes the Lockers.
func harness(t testing.TB, proxied bool) conformance.Harness {
	u := testenv.URL(t, "LOCKER_TEST_REDIS")
	opt, err := goredis.ParseURL(u.String())
	if err != nil {
		t.Fatal(err)
	}
	admin := goredis.NewClient(opt)
	t.Cleanup(func() { admin.Close() })
	var crasher faultproxy.Crasher
	t.Cleanup(func() { _ = crasher.Close() })
	return conformance.Harness{
		NewLocker: func(context.Context) (locker.Locker, error) {
			o := *opt
			o.DialTimeout = time.Second
			var p *faultproxy.Proxy
			if proxied {
				var err error
				if p, err = crasher.Proxy(opt.Addr); err != nil {
					return nil, err
				}
				o.Addr = p.Addr()
			}
			client := goredis.NewClient(&o)
			t.Cleanup(func() { client.Close() })
			l, err := lockredis.New(client, lockredis.WithPrefix(prefix))
			if err != nil {
				return nil, err
			}
			crasher.Track(l, p)
			return l, nil
		},
		Crash:     crasher.Crash,
		Hang:      crasher.Blackhole,
		Slow:      crasher.Delay,
		Count:     func(ctx context.Context, keyPrefix string) (int, error) { return count(ctx, admin, keyPrefix) },
		FIFO:      true,
		TTL:       time.Second,
		RoundTrip: func(ctx context.Context) error { return admin.Ping(ctx).Err() },
	}
}

// count is the records of keys beginning with keyPrefix, in both spaces:
// holders (their hash fields "h...") and queued waiters.
func count(ctx context.Context, admin *goredis.Client, keyPrefix string) (int, error) {
	n := 0
	for _, space := range []string{"", "t"} {
		locks, err := admin.Keys(ctx, rediskey.MatchPrefix(prefix+space+"lock:"+keyPrefix)).Result()
		if err != nil {
			return 0, err
		}
		for _, l := range locks {
			for _, f := range admin.HKeys(ctx, l).Val() {
				if strings.HasPrefix(f, "h") {
					n++
				}
			}
		}
		queues, err := admin.Keys(ctx, rediskey.MatchPrefix(prefix+space+"queue:"+keyPrefix)).Result()
		if err != nil {
			return 0, err
		}
		for _, q := range queues {
			n += int(admin.ZCard(ctx, q).Val())
		}
	}
	return n, nil
}

func TestConformance(t *testing.T) {
	conformance.Run(t, harness(t, true))
}

func BenchmarkConformance(b *testing.B) {
	conformance.Bench(b, harness(b, false))
}
