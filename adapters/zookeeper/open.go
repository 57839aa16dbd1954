package zookeeper

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
)

func init() { locker.Register("zk", open) }

// urlConfig is what a zk:// URL says.
type urlConfig struct {
	servers        []string
	root           string
	user, password string // digest auth when user != ""
	sessionTimeout time.Duration
}

// parseURL reads zk://[user:pass@]host[:port][,host[:port]...][/root][?session_timeout=10s].
// Errors name the URL without its password.
func parseURL(u *url.URL) (urlConfig, error) {
	bad := func(format string, a ...any) (urlConfig, error) {
		return urlConfig{}, fmt.Errorf("%w: %s: %s", locker.ErrInvalidURL, u.Redacted(), fmt.Sprintf(format, a...))
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
	c := urlConfig{root: DefaultRoot, sessionTimeout: DefaultSessionTimeout}
	for _, hp := range strings.Split(u.Host, ",") {
		host, port := hp, strconv.Itoa(zk.DefaultPort)
		if h, p, err := net.SplitHostPort(hp); err == nil {
			host, port = h, p
		} else if strings.Contains(hp, ":") && !strings.HasPrefix(hp, "[") {
			return bad("server %q is not host:port", hp)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
			return bad("server %q is not host:port", hp)
		}
		c.servers = append(c.servers, net.JoinHostPort(strings.Trim(host, "[]"), port))
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

// open connects for locker.Open and waits for a session: until ctx ends, or
// for the session timeout if ctx has no deadline.
func open(ctx context.Context, u *url.URL) (locker.Locker, error) {
	c, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	negotiated := new(atomic.Int64)
	conn, events, err := zk.Connect(c.servers, c.sessionTimeout, zk.WithLogger(sessionLogger{negotiated}), zk.WithLogInfo(true))
	if err != nil {
		return nil, locker.Unavailable(fmt.Errorf("locker/zookeeper: %s: %w", u.Redacted(), err))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.sessionTimeout)
		defer cancel()
	}
	if err := awaitSession(ctx, events); err != nil {
		conn.Close()
		return nil, locker.Unavailable(fmt.Errorf("locker/zookeeper: no session with %s: %w", u.Redacted(), err))
	}
	opts := []Option{WithRoot(c.root), WithSessionTimeout(c.sessionTimeout), withOwnConn(negotiated)}
	if c.user != "" {
		auth := []byte(c.user + ":" + c.password)
		if _, err := call(ctx, func() (struct{}, error) { return struct{}{}, conn.AddAuth("digest", auth) }); err != nil {
			conn.Close()
			return nil, backendErr("digest auth as "+c.user, err)
		}
		opts = append(opts, WithACL(zk.DigestACL(zk.PermAll, c.user, c.password)))
	}
	return newLocker(conn, opts...)
}

// awaitSession waits for go-zookeeper to report a session.
func awaitSession(ctx context.Context, events <-chan zk.Event) error {
	for {
		select {
		case ev, ok := <-events:
			switch {
			case !ok:
				return zk.ErrClosing
			case ev.State == zk.StateHasSession:
				return nil
			case ev.State == zk.StateAuthFailed:
				return zk.ErrAuthFailed
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
