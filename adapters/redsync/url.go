package redsync

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/urlx"
)

func init() { locker.Register("redlock", open) }

// open makes a Locker from
//
//	redlock://[user:pass@]host:port,host:port,...[/db][?prefix=p&node_timeout=50ms]
//
// with one client per master, each with ContextTimeoutEnabled so the node
// timeout also ends its connection's wait. Errors show the URL redacted.
func open(_ context.Context, u *url.URL) (locker.Locker, error) {
	addrs, base, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	clients := make([]goredis.UniversalClient, len(addrs))
	for i, a := range addrs {
		o := *base
		o.Addr = a
		clients[i] = goredis.NewClient(&o)
	}
	l, err := New(clients, append(opts, withOwnClients())...)
	if err != nil { // a master count or an option out of range
		for _, c := range clients {
			_ = c.Close()
		}
		return nil, fmt.Errorf("%w: %s: %w", locker.ErrInvalidURL, urlx.Redact(u), err)
	}
	return l, nil
}

// parseURL splits a redlock URL into master addresses, the client options
// they share, and the Locker's options; New checks their values.
func parseURL(u *url.URL) (addrs []string, base *goredis.Options, opts []Option, err error) {
	if addrs, err = urlx.Hosts(u.Host, "6379"); err != nil { // a master given twice would vote twice
		return nil, nil, nil, urlx.Invalid(u, "masters: %v", err)
	}
	base = &goredis.Options{ContextTimeoutEnabled: true}
	if u.User != nil {
		base.Username = u.User.Username()
		base.Password, _ = u.User.Password()
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		if base.DB, err = strconv.Atoi(p); err != nil || base.DB < 0 {
			return nil, nil, nil, urlx.Invalid(u, "path %q is not a database number", u.Path)
		}
	}
	for k, v := range u.Query() {
		switch k {
		case "prefix":
			opts = append(opts, WithPrefix(v[len(v)-1]))
		case "node_timeout":
			d, err := time.ParseDuration(v[len(v)-1])
			if err != nil {
				return nil, nil, nil, urlx.Invalid(u, "node_timeout %q is not a duration", v[len(v)-1])
			}
			opts = append(opts, WithNodeTimeout(d))
		default:
			return nil, nil, nil, urlx.Invalid(u, "unknown parameter %q (known: prefix, node_timeout)", k)
		}
	}
	return addrs, base, opts, nil
}
