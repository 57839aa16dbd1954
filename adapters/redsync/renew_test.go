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
	// The conformance suite's node timeout, and a TTL that leaves room for
	// it: a loaded -race run left masters unanswered past 15 ms (the
	// default for a 300 ms TTL), past 100 ms, and, beside another
	// package's tests, all five past 250 ms taking the 200 leases (and
	// four past 500 ms once: TakeMany now tries such a take again).
	lk, err := New(clients, WithPrefix("locker-test:"+t.Name()+":"), WithNodeTimeout(harnessNodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	const n, ttl = 200, 2 * time.Second
	used := testenv.KeepMany(t, lk, n, ttl, calls.n.Load, nil) / int64(len(clients))
	t.Logf("%d leases kept alive for 3×TTL with %d scripts per master", n, used)
	if used >= n {
		t.Errorf("%d scripts per master to keep %d leases alive for 3×TTL: renewals are not batched", used, n)
	}
}
