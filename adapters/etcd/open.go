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
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/perproc"
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
// The Lockers of a process opened on the same URL but for its path (the
// same parameters, in the same order) share one client, and the watches
// of the queues that their waiters near the head wait on; the client
// closes with the last of them. The cluster is contacted once, so that an
// unreachable one is reported at once.
func Open(ctx context.Context, u *url.URL) (locker.Locker, error) {
	d, err := openDriver(ctx, u)
	if err != nil {
		return nil, err
	}
	return d.locker(), nil
}

// openDriver is Open's driver.
func openDriver(ctx context.Context, u *url.URL) (*etcdDriver, error) {
	cfg, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	sc, release, err := clients.Get(ctx, clientKey(u), func() (*sharedClient, error) {
		return newSharedClient(cfg)
	}, (*sharedClient).close)
	if err != nil {
		return nil, locker.Unavailable(fmt.Errorf("locker/etcd: connect to %s: %w", urlx.Redact(u), err))
	}
	d, err := newDriver(sc.client, opts...)
	if err == nil {
		d.waits, d.release = &sc.waits, release
		// the client connects lazily: make one linearizable read
		_, err = d.txn(ctx, urlx.Redact(u), nil, []clientv3.Op{clientv3.OpGet(d.prefix)})
	}
	if err != nil {
		release()
		return nil, err
	}
	return d, nil
}

// clients are the etcd clients of this process's Lockers opened by URL,
// by the URL without its path (each Locker's key prefix): 400 Lockers
// opened on one cluster cost one client and one connection, and their
// waiters near the head of a queue one watch of it (queuewatch.go), not
// 400 of each. A client closes with the last of its Lockers.
var clients perproc.Map[string, *sharedClient]

// sharedClient is a client of Lockers opened by URL, and the watches of
// queues that their waiters share, which live as long as the client.
type sharedClient struct {
	client *clientv3.Client
	waits  waitWatches
	stop   context.CancelFunc // ends the watches
	run    sync.WaitGroup     // the watches' goroutines
}

func newSharedClient(cfg clientv3.Config) (*sharedClient, error) {
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	sc := &sharedClient{client: c, stop: stop}
	sc.waits.ctx, sc.waits.run = ctx, &sc.run
	return sc, nil
}

// close ends the watches, then the client, after the last Locker closed.
func (sc *sharedClient) close() {
	sc.stop()
	sc.run.Wait()
	_ = sc.client.Close() // nobody is left to tell
}

// clientKey is what Lockers opened on u share a client by: u but its path.
func clientKey(u *url.URL) string {
	c := *u
	c.Path, c.RawPath, c.Fragment, c.RawFragment = "", "", "", ""
	return c.String()
}

// parseURL turns an etcd URL into a client config and Locker options. Its
// errors wrap locker.ErrInvalidURL and never show the password.
func parseURL(u *url.URL) (cfg clientv3.Config, opts []Option, err error) {
	cfg.Logger = zap.NewNop() // the client's own logging is noise to a library user
	scheme := strings.ToLower(u.Scheme)
	if scheme != "etcd" && scheme != "etcds" {
		return cfg, nil, urlx.Invalid(u, "scheme %q is not etcd or etcds", u.Scheme)
	}
	if cfg.Endpoints, err = urlx.Hosts(u.Host, DefaultPort); err != nil { // also an opaque URL's
		return cfg, nil, urlx.Invalid(u, "%v", err)
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
		if cfg.Username == "" {
			return cfg, nil, urlx.Invalid(u, "a password needs a user name")
		}
	}
	if cfg.TLS, cfg.DialTimeout, err = params(u.Query(), scheme == "etcds"); err != nil {
		return cfg, nil, urlx.Invalid(u, "%v", err)
	}
	opts = []Option{WithRequestTimeout(cfg.DialTimeout)}
	if p := u.Path; p != "" && p != "/" {
		opts = append(opts, WithPrefix(p))
	}
	return cfg, opts, nil
}

// params checks the URL's parameters and returns the TLS config (nil
// without TLS) and the request timeout they ask for.
func params(q url.Values, etcds bool) (*tls.Config, time.Duration, error) {
	timeout, useTLS := DefaultRequestTimeout, etcds
	var err error
	for name, vals := range q {
		switch v := vals[0]; {
		case len(vals) != 1:
			return nil, 0, fmt.Errorf("parameter %q given %d times", name, len(vals))
		case name == "tls":
			if useTLS, err = strconv.ParseBool(v); err != nil || etcds && !useTLS {
				return nil, 0, fmt.Errorf("tls=%q: want true or false (etcds is always TLS)", v)
			}
		case name == "timeout":
			if timeout, err = time.ParseDuration(v); err != nil || timeout <= 0 {
				return nil, 0, fmt.Errorf("timeout=%q: want a positive duration such as 5s", v)
			}
		case name != "ca" && name != "cert" && name != "key":
			return nil, 0, fmt.Errorf("unknown parameter %q (known: tls, ca, cert, key, timeout)", name)
		}
	}
	ca, cert, key := q.Get("ca"), q.Get("cert"), q.Get("key")
	switch {
	case (cert == "") != (key == ""):
		return nil, 0, errors.New("cert and key go together")
	case useTLS:
		tc, err := tlsConfig(ca, cert, key)
		return tc, timeout, err
	case ca != "" || cert != "":
		return nil, 0, errors.New("ca, cert and key need tls=true or etcds://")
	}
	return nil, timeout, nil
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
