package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/locker-go/locker"
	lockredis "github.com/locker-go/locker/adapters/redis"
	"github.com/locker-go/locker/conformance"
)

// BenchmarkContendedSlowNetwork: 8 workers, each its own client through a
// proxy that adds 500 µs each way (a round trip of about 1 ms, as between
// machines), take one key in turn, holding it 1 ms. A release that hands
// the key to the next waiter saves that waiter's own round trip.
func BenchmarkContendedSlowNetwork(b *testing.B) {
	lockers := make([]locker.Locker, 8)
	for i := range lockers {
		p, c, _ := proxiedClient(b)
		p.Delay(500 * time.Microsecond)
		var err error
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
