package etcd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/singleflight"

	"github.com/locker-go/locker"
)

// DefaultPrefix is the key namespace when neither WithPrefix nor a URL path
// names one.
const DefaultPrefix = "/locker/"

// DefaultRequestTimeout bounds each etcd call, so that an unreachable
// cluster yields ErrUnavailable instead of a call blocked until its ctx ends.
const DefaultRequestTimeout = 5 * time.Second

// Option configures New.
type Option func(*config)

type config struct {
	prefix      string
	timeout     time.Duration
	closeClient bool
}

// WithPrefix sets the etcd key namespace every entry lives under (default
// "/locker/"). A '/' is appended if missing.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithRequestTimeout bounds each etcd call (default 5s); a call that
// times out while the caller's ctx is alive reports ErrUnavailable.
func WithRequestTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithCloseClient makes Close also close the client given to New.
func WithCloseClient() Option { return func(c *config) { c.closeClient = true } }

// etcdDriver is the driver.Driver (and driver.Admin) over one etcd client.
// It queues waiters itself, so it needs no driver.Notifier.
type etcdDriver struct {
	client  *clientv3.Client
	prefix  string
	timeout time.Duration
	owned   bool
	flight  singleflight.Group
	// ctx ends when Close begins: it stops the background sweep's waits.
	ctx  context.Context
	stop context.CancelFunc

	mu       sync.Mutex
	shared   map[int64]*etcdLease // per TTL in whole seconds
	orphans  map[*entry]struct{}  // holds whose removal failed, for the sweep
	sweeper  sync.WaitGroup
	sweeping bool // the background sweep runs
}

// New returns a Locker over an existing client. Close leaves the client
// open unless WithCloseClient is given.
func New(client *clientv3.Client, opts ...Option) (locker.Locker, error) {
	d, err := newDriver(client, opts...)
	if err != nil {
		return nil, err
	}
	return locker.New(d), nil
}

func newDriver(client *clientv3.Client, opts ...Option) (*etcdDriver, error) {
	if client == nil {
		return nil, errors.New("locker/etcd: nil client")
	}
	c := config{prefix: DefaultPrefix, timeout: DefaultRequestTimeout}
	for _, o := range opts {
		o(&c)
	}
	if c.prefix == "" {
		return nil, errors.New("locker/etcd: empty prefix")
	}
	if !strings.HasSuffix(c.prefix, "/") {
		c.prefix += "/"
	}
	if c.timeout <= 0 {
		return nil, fmt.Errorf("locker/etcd: request timeout %v is not positive", c.timeout)
	}
	ctx, stop := context.WithCancel(context.Background())
	return &etcdDriver{
		client: client, prefix: c.prefix, timeout: c.timeout, owned: c.closeClient,
		ctx: ctx, stop: stop, shared: map[int64]*etcdLease{}, orphans: map[*entry]struct{}{},
	}, nil
}

// queue is the etcd key prefix holding key's entries, one per holder or waiter.
func (d *etcdDriver) queue(key string) string { return d.prefix + escape(key) + "/" }

// rpc bounds one etcd call by the request timeout.
func (d *etcdDriver) rpc(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.timeout)
}

// fail maps an etcd call's error: once ctx has ended, an error matching
// ctx.Err() (Refresh and Release reach the user unmapped); anything but
// ErrNotHeld as ErrUnavailable.
func (d *etcdDriver) fail(ctx context.Context, key string, err error) error {
	switch {
	case err == nil, errors.Is(err, locker.ErrNotHeld):
		return err
	case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
		return fmt.Errorf("locker/etcd: %q: %w", key, ctx.Err())
	case ctx.Err() != nil:
		return err
	}
	return locker.Unavailable(fmt.Errorf("locker/etcd: %q: %w", key, err))
}

// Close stops the background sweep after one last pass, revokes the shared
// etcd leases (dropping any entry left on them) and, if it owns the
// client, closes it. The portable Locker has released every hold by then.
func (d *etcdDriver) Close(ctx context.Context) error {
	d.mu.Lock()
	d.stop() // under mu: no sweep starts after this
	d.mu.Unlock()
	d.sweeper.Wait()
	d.sweep(ctx) // orphans on another Locker's entry outlive our leases
	d.mu.Lock()
	shared := slices.Collect(maps.Values(d.shared))
	clear(d.shared)
	d.mu.Unlock()
	for _, e := range shared {
		e.revoke(ctx)
	}
	if d.owned {
		return d.client.Close()
	}
	return nil
}
