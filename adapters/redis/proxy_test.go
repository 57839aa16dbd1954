package redis_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/conformance/faultproxy"
	"github.com/locker-go/locker/internal/testenv"
)

// proxiedClient is a client of the test server through a fault proxy of
// its own, and the options to reach the server directly; the proxy and
// client close when t ends.
func proxiedClient(t testing.TB) (*faultproxy.Proxy, *goredis.Client, *goredis.Options) {
	t.Helper()
	opt, err := goredis.ParseURL(testenv.URL(t, "LOCKER_TEST_REDIS").String())
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.New(opt.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	o := *opt
	o.Addr = p.Addr()
	c := goredis.NewClient(&o)
	t.Cleanup(func() { _ = c.Close() })
	return p, c, opt
}
