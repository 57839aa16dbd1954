package redsync

import (
	"context"
	"log/slog"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/conformance/faultproxy"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// WithLogger reaches the driver: a master's subscription lost is logged
// (Warn) with the master's name, and so is its return (Info); the first
// subscriptions are not.
func TestLogsMasterSubscription(t *testing.T) {
	t.Parallel()
	var (
		clients []goredis.UniversalClient
		proxies []*faultproxy.Proxy
	)
	for _, a := range masterAddrs(t) {
		p, err := faultproxy.New(a)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		c := goredis.NewClient(&goredis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		clients, proxies = append(clients, c), append(proxies, p)
	}
	lg, logs := testenv.NewLogs()
	l, err := newTestLocker(clients, WithNodeTimeout(suiteNodeTimeout), WithLogger(lg))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Locker.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, leave, err := l.hub.Subscribe(ctx, hubKey(name{driver.Plain, uniqueKey(t, "k")}, driver.Exclusive))
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	untilSubscribed(t, ctx, l.redlock, 0)
	everyLive(t, l.redlock) // and the driver has seen it: a drop before that is no loss to log
	if s := logs.String(); s != "" {
		t.Errorf("the first subscriptions logged:%s", s)
	}
	proxies[0].Drop()
	r := logs.Wait(t, 10*time.Second, slog.LevelWarn, "subscription was lost")
	logs.Wait(t, 10*time.Second, slog.LevelInfo, "live again")
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "master" && a.Value.String() != "0 "+proxies[0].Addr() {
			t.Errorf("master %q, want master 0's index and address %q", a.Value, proxies[0].Addr())
		}
		return true
	})
}

// untilSubscribed waits until master i's subscription hears a publish.
func untilSubscribed(t *testing.T, ctx context.Context, d *redlock, i int) {
	t.Helper()
	for {
		n, err := d.masters[i].client.Publish(ctx, d.channelPrefix()+":probe", "probe").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("master %d's subscription never came up", i)
		case <-time.After(5 * time.Millisecond): // polling a condition: PUBSUB has no watch
		}
	}
}
