package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
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
	prefix  string
	timeout time.Duration
	owned   bool // Close closes the client
	logger  *slog.Logger
}

// WithPrefix sets the etcd key namespace every entry lives under (default
// "/locker/"). A '/' is appended if missing.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithRequestTimeout bounds each etcd call (default 5s); a call that
// times out while the caller's ctx is alive reports ErrUnavailable.
func WithRequestTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithLogger has the Locker log its rare events to l, as locker.WithLogger
// does for Open: here also the Locker's etcd lease found expired or
// revoked (Warn) and an entry left for the background sweep (Info).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithCloseClient makes Close also close the client given to New.
func WithCloseClient() Option { return func(c *config) { c.owned = true } }

// etcdDriver is the driver.Driver (and driver.Admin, Batcher,
// BatchRefresher, FenceFloorer, ModeKeeper, Watcher) over one etcd client.
// It queues waiters itself, so it needs no driver.Notifier.
type etcdDriver struct {
	config
	client   *clientv3.Client
	granting chan struct{}                // held to use shared
	shared   map[time.Duration]*etcdLease // per TTL in whole seconds
	// ctx ends when Close begins: it stops the background sweep.
	ctx  context.Context
	stop context.CancelFunc

	mu      sync.Mutex
	orphans map[*entry]struct{} // holds whose removal failed, for the sweep
	kick    chan struct{}       // an orphan was added
	sweeper sync.WaitGroup
	started sync.Once // the sweep

	names   *entryNames  // its queue entries' names, reused (names.go)
	offsets offsetCache  // the fence offsets last seen on raised keys (floor.go)
	anchor  anchor       // keeps the waiters' watch stream open (watchstream.go)
	waits   *waitWatches // the waiters' watches of their queues, shared by the Lockers of a client that Open made (queuewatch.go)
	release func()       // lets go of the client that Open shared, if any
	driver.Log
}

// New returns a Locker over an existing client. Close leaves the client
// open unless WithCloseClient is given.
func New(client *clientv3.Client, opts ...Option) (locker.Locker, error) {
	d, err := newDriver(client, opts...)
	if err != nil {
		return nil, err
	}
	return d.locker(), nil
}

// locker is the portable Locker over d, configured by d's options.
func (d *etcdDriver) locker() locker.Locker { return locker.New(d, locker.WithLogger(d.logger)) }

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
	d := &etcdDriver{
		config: c, client: client,
		granting: make(chan struct{}, 1), ctx: ctx, stop: stop, kick: make(chan struct{}, 1),
		shared: map[time.Duration]*etcdLease{}, orphans: map[*entry]struct{}{}, names: newEntryNames(),
	}
	d.waits = &waitWatches{ctx: ctx, run: &d.sweeper} // its own, unless Open shares a client's
	return d, nil
}

// queue is the etcd key prefix holding key's entries, one per holder or waiter.
func (d *etcdDriver) queue(space driver.Space, key string) string {
	return d.spacePrefix(space) + escape(key) + "/"
}

// spacePrefix begins the queues of space: the Subtree space's are under
// "%T", which no escaped key begins with (escape writes '%' as "%25").
func (d *etcdDriver) spacePrefix(space driver.Space) string {
	if space == driver.Subtree {
		return d.prefix + subtreeMark
	}
	return d.prefix
}

const subtreeMark = "%T"

// KeepsModes: entries carry their mode, and an entry holds once every
// entry before it is compatible with it (driver.ModeKeeper's rule, in
// revision order).
func (*etcdDriver) KeepsModes() {}

// rpc bounds one etcd call by the request timeout.
func (d *etcdDriver) rpc(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.timeout)
}

// txn runs one etcd txn, bounded by the request timeout; errors as fail.
func (d *etcdDriver) txn(ctx context.Context, key string, cmp []clientv3.Cmp, then []clientv3.Op, els ...clientv3.Op) (*clientv3.TxnResponse, error) {
	rctx, cancel := d.rpc(ctx)
	defer cancel()
	resp, err := d.client.Txn(rctx).If(cmp...).Then(then...).Else(els...).Commit()
	return resp, d.fail(ctx, key, err)
}

// kvs are the keys a txn's i-th operation, a Get, read.
func kvs(resp *clientv3.TxnResponse, i int) []*mvccpb.KeyValue {
	return resp.Responses[i].GetResponseRange().Kvs
}

// fail maps a failed etcd call's error: once ctx has ended, to one
// matching ctx.Err() (Refresh and Release reach the user unmapped), else
// to ErrUnavailable, wrapping the cause.
func (d *etcdDriver) fail(ctx context.Context, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("locker/etcd: %q: %w", key, ctx.Err())
	}
	return locker.Unavailable(fmt.Errorf("locker/etcd: %q: %w", key, err))
}

// Close stops the background sweep after one last pass, revokes the shared
// etcd leases (dropping any entry left on them) and, if it owns the
// client, closes it; a client that Open shares closes after its last
// Locker. The portable Locker has released every hold, and
// ended every call, by then.
func (d *etcdDriver) Close(ctx context.Context) error {
	d.stop()
	d.sweeper.Wait()
	d.sweep(ctx) // orphans on another Locker's entry outlive our leases
	for _, e := range d.shared {
		e.revoke(ctx)
	}
	if d.release != nil {
		d.release()
	}
	if d.owned {
		return d.client.Close()
	}
	return nil
}
