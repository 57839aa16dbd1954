package redsync

import (
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/internal/testenv"
)

// One Locker's many kept-alive leases are renewed in batches, one script
// per master per tick: over three TTLs, 200 leases cost each master at
// most a script per tick (eight a renewal period: the leases, taken over
// a few hundred ms, spread over its ticks), not one per lease (alone:
// 1,800 each).
func TestRenewalsBatched(t *testing.T) {
	calls := &scriptCounter{}
	var clients []goredis.UniversalClient
	for _, a := range masterAddrs(t) {
		c := goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true})
		c.AddHook(calls)
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	// A node timeout and TTL that a loaded -race run keeps to (the default
	// timeout of a 300 ms TTL, 15 ms, went unanswered there).
	lk, err := New(clients, WithPrefix("locker-test:"+t.Name()+":"), WithNodeTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	const n, ttl = 200, time.Second
	used := testenv.KeepMany(t, lk, n, ttl, calls.n.Load, nil) / int64(len(clients))
	t.Logf("%d leases kept alive for 3×TTL with %d scripts per master", n, used)
	if used >= n {
		t.Errorf("%d scripts per master to keep %d leases alive for 3×TTL: renewals are not batched", used, n)
	}
}
