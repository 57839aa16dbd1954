package redis

import (
	"context"
	"fmt"
	"net/url"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/urlx"
)

func init() {
	locker.Register("redis", Open)
	locker.Register("rediss", Open)
}

// Open returns a Locker for a URL of the form
//
//	redis://[user:password@]host:port[/db][?prefix=locker:&...]
//	rediss://...   (TLS)
//
// prefix sets WithPrefix; every other query parameter is go-redis's (see
// redis.ParseURL, e.g. dial_timeout, pool_size). Open pings the server, so
// an unreachable one is reported at once, as ErrUnavailable.
func Open(ctx context.Context, u *url.URL) (locker.Locker, error) {
	switch hosts, err := urlx.Hosts(u.Host, "6379"); {
	case err != nil:
		return nil, urlx.Invalid(u, "%v", err)
	case len(hosts) > 1:
		return nil, urlx.Invalid(u, "%s names one server; several independent masters are redlock://", u.Scheme)
	}
	q := u.Query()
	opts := []Option{withCloseClient()}
	if q.Has("prefix") {
		opts = append(opts, WithPrefix(q.Get("prefix")))
		q.Del("prefix")
	}
	bare := *u
	bare.RawQuery = q.Encode()
	o, err := goredis.ParseURL(bare.String())
	if err != nil {
		// go-redis errors may quote the URL; name only the redacted one.
		return nil, fmt.Errorf("%w: %s: %v", locker.ErrInvalidURL, urlx.Redact(u), urlx.Scrub(err.Error(), u))
	}
	client := goredis.NewClient(o)
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, locker.Unavailable(fmt.Errorf("locker/redis: %s: %v", o.Addr, urlx.Scrub(err.Error(), u)))
	}
	return New(client, opts...)
}
