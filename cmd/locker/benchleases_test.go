package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// --leases holds N leases through one Locker and reports what keeping them
// alive costs: on Redis, batched renewals take far less than a call per
// lease per renewal (alone, 300 leases renewed every second would be 300
// calls a second, one per lease; batched, a few), no lease is lost, and the goroutines do not grow with
// the leases. SQLite has no server to count calls on: -1.
func TestBenchLeases(t *testing.T) {
	t.Parallel()
	testenv.URL(t, "LOCKER_TEST_REDIS") // -short skips
	// A server of its own: the calls counted are this bench's alone, not
	// those of the tests that share the test server meanwhile.
	redis := "redis://" + testenv.StartRedis(t, 0).Addr
	db := "sqlite://" + filepath.Join(t.TempDir(), "leases.db")
	// A TTL of seconds: SQLite's one writer, under a loaded -race run,
	// may keep a renewal waiting for a good part of a second.
	r := cli(t, testEnv(t), "bench", "--leases", "300", "--ttl", "3s", "--for", "2s", "--json",
		"--backend", redis, "--backend", db).want(t, 0, "bench --leases")
	var results []leasesResult
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil || len(results) != 2 {
		t.Fatalf("bench --leases --json printed %q: %v", r.stdout, err)
	}
	for _, res := range results {
		switch {
		case res.Error != "":
			t.Errorf("%s: %s", res.Label, res.Error)
		case res.Leases != 300 || res.Lost != 0:
			t.Errorf("%s: %d leases, %d lost; want 300, none lost", res.Label, res.Leases, res.Lost)
		case res.Goroutines >= 50:
			t.Errorf("%s: %d goroutines more while 300 leases are held: they grow with the leases", res.Label, res.Goroutines)
		case res.CPU < 0 || res.TakeS <= 0:
			t.Errorf("%s: implausible figures %+v", res.Label, res)
		}
	}
	if redisRes := results[0]; redisRes.Calls < 0 || redisRes.CallsPerLease >= 0.2 {
		t.Errorf("Redis: %.1f calls/s (%.3f per lease): renewals are not batched, or not counted", redisRes.Calls, redisRes.CallsPerLease)
	}
	if sqliteRes := results[1]; sqliteRes.Calls != -1 {
		t.Errorf("SQLite: calls %v, want -1 (no server to count on)", sqliteRes.Calls)
	}
}

func TestBenchLeasesBadInput(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--leases", "-1"}, {"--leases", "5", "--ttl", "0s"}, {"--leases", "5", "--for", "-1s"}} {
		cli(t, testEnv(t), append([]string{"bench", "--backend", "mem:"}, args...)...).want(t, exitUsage, fmt.Sprint(args))
	}
}

// Each backend's call counter reads the server's count, and it grows with
// the calls a Locker makes.
func TestCallCounters(t *testing.T) {
	t.Parallel()
	for _, env := range []string{"LOCKER_TEST_REDIS", "LOCKER_TEST_REDLOCK", "LOCKER_TEST_ETCD", "LOCKER_TEST_ZK", "LOCKER_TEST_POSTGRES", "LOCKER_TEST_MYSQL"} {
		t.Run(env, func(t *testing.T) {
			u := testenv.URL(t, env)
			c, ok := counterFor(u)
			if !ok {
				t.Fatalf("no call counter for %s", u.Scheme)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			before, err := c.read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			l, err := locker.Open(ctx, u.String())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for i := range 20 {
				lease, err := l.Lock(ctx, fmt.Sprintf("calls/%s/%d", t.Name(), i))
				if err != nil {
					t.Fatal(err)
				}
				if err := lease.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			after, err := c.read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if after-before < 20*int64(c.servers) && after-before < 20 {
				t.Errorf("%d calls counted for 20 lock+unlock pairs (from %d to %d)", after-before, before, after)
			}
		})
	}
}
