package redsync

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance"
	"github.com/locker-go/locker/conformance/faultproxy"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/rediskey"
	"github.com/locker-go/locker/internal/testenv"
)

// masterAddrs returns the test masters' addresses from LOCKER_TEST_REDLOCK.
func masterAddrs(t testing.TB) []string {
	t.Helper()
	addrs, _, _, err := parseURL(testenv.URL(t, "LOCKER_TEST_REDLOCK"))
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// newLocker dials every master through a proxy of its own, so that Crash
// can make the client vanish from all of them at once. Its clients are
// closed when t ends.
func newLocker(t testing.TB, crasher *faultproxy.Crasher, addrs []string, opts ...Option) (locker.Locker, error) {
	var (
		clients []goredis.UniversalClient
		proxies []*faultproxy.Proxy
	)
	for _, a := range addrs {
		p, err := crasher.Proxy(a)
		if err != nil {
			return nil, err
		}
		c := goredis.NewClient(&goredis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
		proxies = append(proxies, p)
	}
	l, err := New(clients, opts...)
	if err != nil {
		return nil, err
	}
	crasher.Track(l, proxies...)
	return l, nil
}

// liveScript lists a key's live entries on one master: its holders as
// "<mode> <owner>" and its waiting marks as "w<mode><call id>". KEYS: the
// key's records (redlock.records).
var liveScript = goredis.NewScript(luaPrelude + `
local out = {}
local x = redis.call('HMGET', KEYS[1], 'o', 'x', 'xe')
if x[1] == '' and x[2] and alive(x[3]) then
  out[1] = '0 ' .. x[2]
end
for m = 1, 4 do
  for _, o in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1 + m], '(' .. now, '+inf')) do
    out[#out + 1] = m .. ' ' .. o
  end
end
for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '(' .. now, '+inf')) do
  out[#out + 1] = 'w' .. w
end
return out
`)

// countRecords counts the live holders and waiting marks of keys
// beginning with prefix, in both spaces, that any master holds (a record
// on a minority is a record left behind too).
func countRecords(ctx context.Context, addrs []string, prefix string) (int, error) {
	d := &redlock{cfg: config{prefix: DefaultPrefix}}
	live := map[string]bool{}
	for _, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		err := func() error {
			defer c.Close()
			for _, s := range []driver.Space{driver.Plain, driver.Subtree} {
				head := d.anchor(name{s, ""})
				keys, err := rediskey.Scan(ctx, c, rediskey.MatchPrefix(d.anchor(name{s, prefix})))
				if err != nil {
					return fmt.Errorf("SCAN %s: %w", a, err)
				}
				for _, k := range keys {
					n := name{s, strings.TrimPrefix(k, head)}
					entries, err := liveScript.Run(ctx, c, d.records(n)).StringSlice()
					if err != nil {
						return fmt.Errorf("records of %q on %s: %w", k, a, err)
					}
					for _, e := range entries {
						live[k+"\x00"+e] = true
					}
				}
			}
			return nil
		}()
		if err != nil {
			return 0, err
		}
	}
	return len(live), nil
}

// suiteNodeTimeout is the per-node timeout of this package's tests: their
// many parallel subtests under -race on a small shared machine can hold a
// reply past the 50 ms default; the fault tests keep the default.
const suiteNodeTimeout = 250 * time.Millisecond

// harnessNodeTimeout is the conformance suite's: its MutualExclusion, beside
// other packages' tests, saw all five masters unanswered past 250 ms at
// once (a stalled test process, not a master). Its TTLs (1 s and up) leave
// validity to spare.
const harnessNodeTimeout = 500 * time.Millisecond

// harness makes each Locker through proxies that Crash cuts; they and the
// Lockers' clients are closed when t ends, the Lockers by the suite.
func harness(t testing.TB) conformance.Harness {
	addrs := masterAddrs(t)
	var crasher faultproxy.Crasher
	t.Cleanup(func() { _ = crasher.Close() })
	return conformance.Harness{
		NewLocker: func(context.Context) (locker.Locker, error) {
			return newLocker(t, &crasher, addrs, WithNodeTimeout(harnessNodeTimeout))
		},
		Crash:      crasher.Crash,
		Hang:       crasher.Blackhole,
		Slow:       crasher.Delay,
		Contenders: raceContenders,
		Count:      func(ctx context.Context, prefix string) (int, error) { return countRecords(ctx, addrs, prefix) },
		RoundTrip: func(ctx context.Context) error {
			return ping(addrs[0]).Ping(ctx).Err()
		},
	}
}

var (
	pingMu      sync.Mutex
	pingClients = map[string]*goredis.Client{}
)

// ping returns a plain client of one master, for RoundTrip.
func ping(addr string) *goredis.Client {
	pingMu.Lock()
	defer pingMu.Unlock()
	if c := pingClients[addr]; c != nil {
		return c
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	pingClients[addr] = c
	return c
}

func TestConformance(t *testing.T) {
	conformance.Run(t, harness(t))
}

// raceContenders is LimitContention's contenders in this package's race
// run: 50 through proxies under the detector left the masters' replies
// past their 500 ms timeout. TestLoadLimitContention runs the 50, in
// scripts/test's step without the detector.
var raceContenders = map[bool]int{true: 16, false: 0}[testenv.Race]

// TestLoadLimitContention is the conformance check LimitContention with
// its 50 contenders, without the race detector (scripts/test runs the
// TestLoad tests so).
func TestLoadLimitContention(t *testing.T) {
	if testenv.Race {
		t.Skip("50 contenders through proxies under the race detector measure the detector: scripts/test runs this without it")
	}
	h := harness(t)
	h.Contenders, h.Prefix = 50, fmt.Sprintf("conformance-load-%d/%s/", time.Now().UnixNano(), t.Name())
	for _, c := range conformance.Checks() {
		if c.Name == "LimitContention" {
			if err := c.Run(t.Context(), h); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatal("no LimitContention check")
}

// BenchmarkConformance connects straight to the masters, as RoundTrip
// does: the suite's fault proxies would double every hop.
func BenchmarkConformance(b *testing.B) {
	h := harness(b)
	h.NewLocker = func(context.Context) (locker.Locker, error) {
		l, _ := plainLocker(b)
		return l.Locker, nil
	}
	conformance.Bench(b, h)
}

// BenchmarkRound is the floor under lock+unlock: one PING to all five
// masters in parallel, as each round of the adapter sends its scripts.
// Lock+unlock costs two such rounds when uncontended.
func BenchmarkRound(b *testing.B) {
	addrs := masterAddrs(b)
	clients := make([]goredis.UniversalClient, len(addrs))
	for i, a := range addrs {
		clients[i] = ping(a)
	}
	d, err := newDriver(clients)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		for i, r := range each(ctx, d, time.Second, func(ctx context.Context, _ int, c goredis.UniversalClient) (string, error) {
			return c.Ping(ctx).Result()
		}) {
			if r.err != nil {
				b.Fatalf("master %d: %v", i, r.err)
			}
		}
	}
}

// quiet drops go-redis's log lines: the clients of crashed Lockers keep
// redialling their cut proxies until the test ends.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { goredis.SetLogger(quiet{}) }
