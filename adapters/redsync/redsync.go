package redsync

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/lease"
	"github.com/locker-go/locker/internal/wait"
)

// Defaults of the options.
const (
	DefaultPrefix      = "locker:"
	DefaultNodeTimeout = 50 * time.Millisecond
	DefaultDriftFactor = 0.01 // redsync's
)

// ErrMasterCount is returned by New for a master list whose length is not
// an odd number of at least 3, or that holds a nil client.
var ErrMasterCount = errors.New("redsync: Redlock needs an odd number (at least 3) of independent masters")

// ErrInvalidOption is returned by New for an out-of-range option.
var ErrInvalidOption = errors.New("redsync: invalid option")

// Option configures a Locker made by New.
type Option func(*config)

type config struct {
	prefix      string
	nodeTimeout time.Duration
	driftFactor float64
	ownClients  bool // Close closes the clients (Open made them)
}

// WithPrefix sets the namespace every Redis key and channel of the Locker
// begins with (default "locker:"). Lockers sharing masters and a prefix
// see each other's locks.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithNodeTimeout bounds how long one round waits for each master (default
// 50 ms). Keep it small against the TTL: it is how long a stopped master
// can delay a lock. Set the clients' ContextTimeoutEnabled too, so their
// connections give up as soon (Open does).
func WithNodeTimeout(d time.Duration) Option { return func(c *config) { c.nodeTimeout = d } }

// WithDriftFactor sets the clock drift allowance as a fraction of the TTL
// (default 0.01, as redsync's); 2 ms are added to it.
func WithDriftFactor(f float64) Option { return func(c *config) { c.driftFactor = f } }

func withOwnClients() Option { return func(c *config) { c.ownClients = true } }

// Locker is the Redlock locker.Locker; it also implements locker.Admin.
type Locker struct {
	cfg     config
	masters []*master
	quorum  int
	set     *lease.Set
	hub     *wait.Hub
	news    news
	counted atomic.Uint64  // largest fence counter seen on any master
	bg      sync.WaitGroup // background retries
}

var (
	_ locker.Locker = (*Locker)(nil)
	_ locker.Admin  = (*Locker)(nil)
)

// New returns a Locker over clients, one per independent master: an odd
// number, at least 3. The clients stay the caller's to close.
func New(clients []goredis.UniversalClient, opts ...Option) (locker.Locker, error) {
	cfg := config{prefix: DefaultPrefix, nodeTimeout: DefaultNodeTimeout, driftFactor: DefaultDriftFactor}
	for _, o := range opts {
		o(&cfg)
	}
	if len(clients) < 3 || len(clients)%2 == 0 {
		return nil, fmt.Errorf("%w: got %d", ErrMasterCount, len(clients))
	}
	switch {
	case cfg.nodeTimeout <= 0:
		return nil, fmt.Errorf("%w: node timeout %v is not positive", ErrInvalidOption, cfg.nodeTimeout)
	case cfg.driftFactor < 0 || cfg.driftFactor >= 0.5:
		return nil, fmt.Errorf("%w: drift factor %v is outside [0, 0.5)", ErrInvalidOption, cfg.driftFactor)
	}
	l := &Locker{cfg: cfg, quorum: len(clients)/2 + 1, set: lease.NewSet()}
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("%w: client %d is nil", ErrMasterCount, i)
		}
		l.masters = append(l.masters, &master{client: c})
	}
	l.hub = wait.NewHub(notifier{l})
	return l, nil
}

func (l *Locker) lockKey(key string) string { return l.cfg.prefix + "l:" + key }
func (l *Locker) channel(key string) string { return l.cfg.prefix + "r:" + key }
func (l *Locker) counterKey() string        { return l.cfg.prefix + "fence" }

// drift is Redlock's allowance for clock drift between the masters.
func (l *Locker) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*l.cfg.driftFactor) + 2*time.Millisecond
}

// resolve checks the call's input before anything reaches a master.
func (l *Locker) resolve(ctx context.Context, key string, opts []locker.Option) (context.Context, locker.Options, func(), error) {
	ctx, o, end, err := l.set.Begin(ctx, key, opts)
	if err != nil {
		return ctx, o, nil, err
	}
	if o.TTL <= l.drift(o.TTL)+l.cfg.nodeTimeout {
		end()
		return ctx, o, nil, fmt.Errorf("%w: %v leaves no validity after the drift allowance and a node timeout", locker.ErrInvalidTTL, o.TTL)
	}
	return ctx, o, end, nil
}

// Lock acquires key on a quorum of masters, waiting for release
// notifications while another owner holds it.
func (l *Locker) Lock(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	ctx, o, end, err := l.resolve(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	defer end()
	var last time.Duration // how long our last attempt took
	return wait.Until(ctx, key,
		func(ctx context.Context) (locker.Lease, time.Duration, error) {
			// A release wakes every waiter of every client at once. Each
			// waits a random part of one attempt's time first, so the
			// first of them acquires on quiet masters and the others find
			// it held, instead of all splitting the masters between them.
			woke := time.Now()
			if last > 0 && !sleep(ctx, rand.N(last)) {
				return nil, 0, wait.CtxErr(ctx, key, ctx.Err())
			}
			if ttl, ok := l.news.takenSince(key, woke); ok {
				return nil, ttl, fmt.Errorf("%w: %q", locker.ErrLocked, key)
			}
			start := time.Now()
			lease, retry, err := l.attempt(ctx, key, o, last > 0)
			last = time.Since(start)
			return lease, retry, err
		},
		func(ctx context.Context) (<-chan struct{}, func(), error) { return l.hub.Subscribe(ctx, key) })
}

// sleep waits d or until ctx ends; false if ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// TryLock makes one Redlock attempt; ErrLocked if another owner holds key.
func (l *Locker) TryLock(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	ctx, o, end, err := l.resolve(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	defer end()
	lease, _, err := l.attempt(ctx, key, o, false)
	return lease, err
}

// Close unlocks the held leases best-effort, ends waiting Locks and stops
// the subscriptions; it closes the clients only if Open made them.
func (l *Locker) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.set.Close(ctx); err != nil {
		return err
	}
	var errs []error
	for _, m := range l.masters {
		m.stop()
		if l.cfg.ownClients {
			errs = append(errs, m.client.Close())
		}
	}
	return errors.Join(errs...)
}
