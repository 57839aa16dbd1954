package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/singleflight"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/lease"
	"github.com/locker-go/locker/internal/wait"
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

// Locker is a locker.Locker and locker.Admin over one etcd client.
type Locker struct {
	client  *clientv3.Client
	prefix  string
	timeout time.Duration
	owned   bool

	set    *lease.Set
	flight singleflight.Group

	mu       sync.Mutex
	shared   map[int64]*etcdLease // per TTL in whole seconds
	orphans  map[orphan]struct{}  // holds whose removal failed, for the sweep
	sweeping bool                 // the background sweep runs
	closing  bool                 // Close began: start no sweep
	sweeper  sync.WaitGroup
}

var (
	_ locker.Locker = (*Locker)(nil)
	_ locker.Admin  = (*Locker)(nil)
)

// New returns a Locker over an existing client. Close leaves the client
// open unless WithCloseClient is given.
func New(client *clientv3.Client, opts ...Option) (locker.Locker, error) {
	return newLocker(client, opts...)
}

func newLocker(client *clientv3.Client, opts ...Option) (*Locker, error) {
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
	return &Locker{
		client:  client,
		prefix:  c.prefix,
		timeout: c.timeout,
		owned:   c.closeClient,
		set:     lease.NewSet(),
		shared:  map[int64]*etcdLease{},
		orphans: map[orphan]struct{}{},
	}, nil
}

// queue is the etcd key prefix holding key's entries, one per holder or waiter.
func (l *Locker) queue(key string) string { return l.prefix + escape(key) + "/" }

// rpc bounds one etcd call by the request timeout.
func (l *Locker) rpc(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.timeout)
}

// fail maps an etcd call's error: ctx's end as wait.CtxErr reports it,
// anything else as ErrUnavailable.
func (l *Locker) fail(ctx context.Context, key string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return wait.CtxErr(ctx, key, err)
	}
	if errors.Is(err, locker.ErrNotHeld) || errors.Is(err, locker.ErrLocked) || errors.Is(err, locker.ErrClosed) {
		return err
	}
	return locker.Unavailable(fmt.Errorf("locker/etcd: %q: %w", key, err))
}

// Close unlocks every lease of this Locker best-effort, stops the
// background sweep after one last pass, revokes its shared etcd leases
// (dropping any entry left on them) and, if it owns the client, closes it.
func (l *Locker) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	if err := l.set.Close(ctx); err != nil { // also stops the sweep's waits
		return err
	}
	l.mu.Lock()
	l.closing = true
	l.mu.Unlock()
	l.sweeper.Wait()
	l.sweep(ctx) // orphans on another Locker's entry outlive our leases
	l.mu.Lock()
	shared := make([]*etcdLease, 0, len(l.shared))
	for _, e := range l.shared {
		shared = append(shared, e)
	}
	clear(l.shared)
	l.mu.Unlock()
	for _, e := range shared {
		e.revoke(ctx)
	}
	if l.owned {
		return l.client.Close()
	}
	return nil
}
