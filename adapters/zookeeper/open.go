package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/urlx"
)

func init() { locker.Register("zk", open) }

// urlConfig is what a zk:// URL says.
type urlConfig struct {
	servers        []string
	root           string
	user, password string        // digest auth when user != ""
	sessionTimeout time.Duration // 0 unless given: derive sessions from TTLs
}

// parseURL reads zk://[user:pass@]host[:port][,host[:port]...][/root][?session_timeout=10s].
// Errors name the URL without its password.
func parseURL(u *url.URL) (urlConfig, error) {
	bad := func(format string, a ...any) (urlConfig, error) {
		return urlConfig{}, urlx.Invalid(u, format, a...)
	}
	if !strings.EqualFold(u.Scheme, "zk") {
		return bad("scheme is not zk")
	}
	if u.Opaque != "" || u.Host == "" {
		return bad("want zk://host:port[,host:port]/root")
	}
	if u.Fragment != "" {
		return bad("a fragment means nothing here")
	}
	c := urlConfig{root: DefaultRoot}
	var err error
	if c.servers, err = urlx.Hosts(u.Host, strconv.Itoa(zk.DefaultPort)); err != nil {
		return bad("%v", err)
	}
	if u.Path != "" && u.Path != "/" {
		if err := checkRoot(u.Path); err != nil {
			return bad("%v", err)
		}
		c.root = u.Path
	}
	if u.User != nil {
		pass, ok := u.User.Password()
		if u.User.Username() == "" || !ok {
			return bad("digest auth needs user:password")
		}
		c.user, c.password = u.User.Username(), pass
	}
	for k, v := range u.Query() {
		switch {
		case k == "session_timeout" && len(v) == 1:
			d, err := time.ParseDuration(v[0])
			if err != nil || d <= 0 {
				return bad("session_timeout %q is not a positive duration", v[0])
			}
			c.sessionTimeout = d
		default:
			return bad("unknown or repeated parameter %q", k)
		}
	}
	return c, nil
}

// open connects for locker.Open and waits for a session (for the session
// timeout if ctx has no deadline): the pinned one, or that of
// locker.DefaultTTL's rung.
func open(ctx context.Context, u *url.URL) (locker.Locker, error) {
	d, err := openWith(ctx, u)
	if err != nil {
		return nil, err
	}
	return d.locker(), nil
}

// openWith is open's driver, with options on top of the URL's (tests).
func openWith(ctx context.Context, u *url.URL, opts ...Option) (*zkDriver, error) {
	c, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	opts = append([]Option{WithRoot(c.root)}, opts...)
	d := &dialer{servers: c.servers, name: urlx.Redact(u)}
	if c.user != "" {
		d.auth = c.user + ":" + c.password
		opts = append(opts, WithACL(zk.DigestACL(zk.PermAll, c.user, c.password)))
	}
	asked := rung(locker.DefaultTTL)
	if c.sessionTimeout > 0 {
		asked = c.sessionTimeout
		opts = append(opts, WithSessionTimeout(asked))
	}
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, max(asked, time.Second))
		defer cancel()
	}
	s, err := connect(ctx, d.servers, asked, d.auth)
	var auth *authError
	switch {
	case errors.As(err, &auth):
		return nil, backendErr("digest auth as "+c.user, auth.err)
	case err != nil:
		return nil, locker.Unavailable(fmt.Errorf("locker/zookeeper: no session with %s: %w", urlx.Redact(u), err))
	}
	if c.sessionTimeout > 0 {
		d = nil // pinned
	}
	return newDriver(s, d, cfg), nil
}
