package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	lockredis "github.com/locker-go/locker/adapters/redis"
	"github.com/locker-go/locker/conformance"
	"github.com/locker-go/locker/conformance/faultproxy"
	"github.com/locker-go/locker/internal/testenv"
)

// BenchmarkContendedSlowNetwork: 8 workers, each its own client through a
// proxy that adds 500 µs each way (a round trip of about 1 ms, as between
// machines), take one key in turn, holding it 1 ms. A release that hands
// the key to the next waiter saves that waiter's own round trip.
func BenchmarkContendedSlowNetwork(b *testing.B) {
	u := testenv.URL(b, "LOCKER_TEST_REDIS")
	opt, err := goredis.ParseURL(u.String())
	if err != nil {
		b.Fatal(err)
	}
	lockers := make([]locker.Locker, 8)
	for i := range lockers {
		p, err := faultproxy.New(opt.Addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Close() })
		p.Delay(500 * time.Microsecond)
		o := *opt
		o.Addr = p.Addr()
		c := goredis.NewClient(&o)
		b.Cleanup(func() { _ = c.Close() })
		if lockers[i], err = lockredis.New(c, lockredis.WithPrefix(prefix+"slownet:")); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = lockers[i].Close() })
	}
	b.ResetTimer()
	res, err := conformance.Contend(context.Background(), lockers, "k", b.N, time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.OpsPerSec(), "ops/s")
}
