package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/urlx"
)

func init() {
	locker.Register("etcd", Open)
	locker.Register("etcds", Open)
}

// DefaultPort is used for a host given without a port.
const DefaultPort = "2379"

// Open connects to the etcd cluster a URL names, for locker.Open:
//
//	etcd://[user:password@]host[:port][,host[:port]...][/prefix][?param=value...]
//	etcds://...   the same over TLS
//
// The path is the key namespace (default /locker/). Parameters:
//
//	tls=true       use TLS (implied by etcds)
//	ca=FILE        PEM CA bundle to verify the servers (default: system roots)
//	cert=FILE, key=FILE  client certificate and key (both or neither)
//	timeout=5s     per-call timeout (also the dial timeout)
//
// The returned Locker owns its client and closes it in Close.
func Open(ctx context.Context, u *url.URL) (locker.Locker, error) {
	cfg, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	client, err := clientv3.New(cfg)
	if err != nil {
		return nil, locker.Unavailable(fmt.Errorf("locker/etcd: connect to %s: %w", urlx.Redact(u), err))
	}
	d, err := newDriver(client, append(opts, WithCloseClient())...)
	if err != nil {
		client.Close()
		return nil, err
	}
	// The client connects lazily: make one linearizable read to know the
	// cluster answers.
	rctx, cancel := d.rpc(ctx)
	defer cancel()
	if _, err := client.Get(rctx, d.prefix); err != nil {
		client.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("locker/etcd: connect to %s: %w", urlx.Redact(u), ctx.Err())
		}
		return nil, locker.Unavailable(fmt.Errorf("locker/etcd: connect to %s: %w", urlx.Redact(u), err))
	}
	return locker.New(d), nil
}

// parseURL turns an etcd URL into a client config and Locker options. Its
// errors wrap locker.ErrInvalidURL and never show the password.
func parseURL(u *url.URL) (clientv3.Config, []Option, error) {
	bad := func(format string, args ...any) error {
		return urlx.Invalid(u, format, args...)
	}
	cfg := clientv3.Config{Logger: zap.NewNop()} // the client's own logging is noise to a library user
	scheme := strings.ToLower(u.Scheme)
	if scheme != "etcd" && scheme != "etcds" {
		return cfg, nil, bad("scheme %q is not etcd or etcds", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return cfg, nil, bad("no host: want etcd://host:port[,host:port]/prefix")
	}
	var err error
	if cfg.Endpoints, err = urlx.Hosts(u.Host, DefaultPort); err != nil {
		return cfg, nil, bad("%v", err)
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
		if cfg.Username == "" {
			return cfg, nil, bad("a password needs a user name")
		}
	}
	if cfg.TLS, cfg.DialTimeout, err = params(u.Query(), scheme == "etcds"); err != nil {
		return cfg, nil, bad("%v", err)
	}
	opts := []Option{WithRequestTimeout(cfg.DialTimeout)}
	if p := u.Path; p != "" && p != "/" {
		opts = append(opts, WithPrefix(p))
	}
	return cfg, opts, nil
}

// params checks the URL's parameters and returns the TLS config (nil
// without TLS) and the request timeout they ask for.
func params(q url.Values, etcds bool) (*tls.Config, time.Duration, error) {
	timeout, useTLS := DefaultRequestTimeout, etcds
	for name, vals := range q {
		if len(vals) != 1 {
			return nil, 0, fmt.Errorf("parameter %q given %d times", name, len(vals))
		}
		switch v := vals[0]; name {
		case "tls":
			b, err := strconv.ParseBool(v)
			if err != nil || (etcds && !b) {
				return nil, 0, fmt.Errorf("tls=%q: want true or false (etcds is always TLS)", v)
			}
			useTLS = b
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, 0, fmt.Errorf("timeout=%q: want a positive duration such as 5s", v)
			}
			timeout = d
		case "ca", "cert", "key":
		default:
			return nil, 0, fmt.Errorf("unknown parameter %q (known: tls, ca, cert, key, timeout)", name)
		}
	}
	ca, cert, key := q.Get("ca"), q.Get("cert"), q.Get("key")
	switch {
	case (cert == "") != (key == ""):
		return nil, 0, errors.New("cert and key go together")
	case !useTLS && (ca != "" || cert != ""):
		return nil, 0, errors.New("ca, cert and key need tls=true or etcds://")
	case !useTLS:
		return nil, timeout, nil
	}
	tc, err := tlsConfig(ca, cert, key)
	return tc, timeout, err
}

func tlsConfig(ca, cert, key string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("ca: %v", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca: %s holds no PEM certificate", ca)
		}
	}
	if cert != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("cert/key: %v", err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}
