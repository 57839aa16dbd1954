package redsync

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
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
	prefix         string
	nodeTimeout    time.Duration
	nodeTimeoutSet bool // else it is NodeTimeout(each call's TTL)
	driftFactor    float64
	ownClients     bool // Close closes the clients (Open made them)
	logger         *slog.Logger
}

// WithPrefix sets the namespace every Redis key and channel of the Locker
// begins with (default "locker:"). Lockers sharing masters and a prefix
// see each other's locks.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithLogger has the Locker log its rare events to l, as locker.WithLogger
// does for Open: here also a master's subscription lost (Warn) and made
// again (Info).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithNodeTimeout bounds how long one round waits for each master
// (default: NodeTimeout of the call's TTL). Keep it small against the TTL:
// a stopped master can delay a lock that long. Set the clients'
// ContextTimeoutEnabled too, so their connections give up as soon (Open
// does).
func WithNodeTimeout(d time.Duration) Option {
	return func(c *config) { c.nodeTimeout, c.nodeTimeoutSet = d, true }
}

// NodeTimeout is the default per-master timeout of a call with the given
// TTL: a twentieth of the TTL, within [DefaultNodeTimeout, 1s]. That is
// small against the TTL, as Redlock asks, and far above a healthy master's
// reply even when many waiters queue for the client's connections (a
// fixed 50 ms failed healthy masters under load).
func NodeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/20, DefaultNodeTimeout), time.Second)
}

func (d *redlock) nodeTimeout(ttl time.Duration) time.Duration {
	if d.cfg.nodeTimeoutSet {
		return d.cfg.nodeTimeout
	}
	return NodeTimeout(ttl)
}

// WithDriftFactor sets the clock drift allowance as a fraction of the TTL
// (default 0.01, as redsync's); 2 ms are added to it.
func WithDriftFactor(f float64) Option { return func(c *config) { c.driftFactor = f } }

func withOwnClients() Option { return func(c *config) { c.ownClients = true } }

// redlock is the driver: driver.Driver, ModeKeeper, Batcher, Notifier and
// Admin.
type redlock struct {
	cfg       config
	masters   []*master
	quorum    int
	hub       *wait.Hub
	news      news
	watches   watches        // Watch's signals (watch.go)
	counted   atomic.Uint64  // largest fence counter seen on any master
	stamped   atomic.Int64   // the last waiter's stamp (nextStamp)
	id        string         // names the channel of the hand-offs to this driver's calls (handoff.go)
	mastersID string         // the masters, named in order (mastersOf): a hand-off here needs the same (handHere)
	crew      *crew          // runs a round's calls (crew.go)
	bg        sync.WaitGroup // background work (goBG): late replies, release retries
	bgMu      sync.Mutex     // guards closed, and bg's Add against Close's Wait
	closed    bool
	stop      context.Context
	halt      context.CancelFunc // at Close of a Locker that owns its clients: retries give up

	// settlePause is Status's pause before it reads again while a fence
	// settles (settleWait, or a test's)
	settlePause func(ctx context.Context) error

	listening sync.Once  // the masters' subscriptions started
	mu        sync.Mutex // guards changed and the masters' live
	changed   chan struct{}
	driver.Log
}

var (
	_ driver.ModeKeeper = (*redlock)(nil)
	_ driver.Batcher    = (*redlock)(nil)
	_ driver.Notifier   = (*redlock)(nil)
	_ driver.Admin      = (*redlock)(nil)
	_ driver.Watcher    = (*redlock)(nil)
	_ driver.Announcer  = (*redlock)(nil)
)

// New returns a Locker over clients, one per independent master: an odd
// number, at least 3. The clients stay the caller's to close. The Locker
// also implements locker.Admin.
func New(clients []goredis.UniversalClient, opts ...Option) (locker.Locker, error) {
	d, err := newDriver(clients, opts...)
	if err != nil {
		return nil, err
	}
	return d.locker(), nil
}

// locker is the portable Locker over d, configured by d's options.
func (d *redlock) locker() locker.Locker { return locker.New(d, locker.WithLogger(d.cfg.logger)) }

func newDriver(clients []goredis.UniversalClient, opts ...Option) (*redlock, error) {
	cfg := config{prefix: DefaultPrefix, driftFactor: DefaultDriftFactor}
	for _, o := range opts {
		o(&cfg)
	}
	if n := len(clients); n < 3 || n%2 == 0 || slices.Contains(clients, nil) {
		return nil, fmt.Errorf("%w: got %d clients", ErrMasterCount, n)
	}
	switch {
	case cfg.nodeTimeoutSet && cfg.nodeTimeout <= 0:
		return nil, fmt.Errorf("%w: node timeout %v is not positive", ErrInvalidOption, cfg.nodeTimeout)
	case cfg.driftFactor < 0 || cfg.driftFactor >= 0.5:
		return nil, fmt.Errorf("%w: drift factor %v is outside [0, 0.5)", ErrInvalidOption, cfg.driftFactor)
	}
	d := &redlock{cfg: cfg, id: rand.Text(), quorum: len(clients)/2 + 1, news: news{need: len(clients)/2 + 1, keys: map[string]*keyNews{}}, changed: make(chan struct{}), crew: newCrew(crewIdle)}
	d.stop, d.halt = context.WithCancel(context.Background())
	d.settlePause = pauseFor(settleWait)
	for i, c := range clients {
		m := &master{client: c, index: i, name: fmt.Sprint(i)}
		if o, ok := c.(interface{ Options() *goredis.Options }); ok {
			m.name += " " + o.Options().Addr
		}
		d.masters = append(d.masters, m)
	}
	d.hub = wait.NewWakeOneHub(notifier{d})
	d.mastersID = mastersOf(d.masters)
	drivers.Store(d.id, d)
	return d, nil
}

// KeepsModes declares that Acquire grants by driver.ModeKeeper's rule
// (acquireScript applies it on each master).
func (d *redlock) KeepsModes() {}

// drift is Redlock's allowance for clock drift between the masters.
func (d *redlock) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*d.cfg.driftFactor) + 2*time.Millisecond
}

// Subscribe joins the waiters of r's key in r's mode.
func (d *redlock) Subscribe(ctx context.Context, r *driver.Request) (<-chan struct{}, func(), error) {
	st := stateOf(r)
	// The call's stamp is taken as it takes its place among this Locker's
	// waiters: the longest waiting here, whom a release wakes, is then the
	// first of them among the marks too. (Stamped at its first queued
	// attempt instead, a waiter that subscribed first could stand behind
	// one that subscribed after it: woken, it would see that one first and
	// wait on, and that one, not woken, would wait out its marks' TTL/3.)
	return d.hub.SubscribeInOrder(ctx, hubKey(nameOf(r), r.Mode), func() {
		if st.stamp == 0 {
			st.stamp = d.nextStamp()
		}
	})
}

// nextStamp is the client's clock in µs, above every stamp given before,
// so this Locker's waiters stand in the order they subscribed.
func (d *redlock) nextStamp() int64 {
	for {
		last := d.stamped.Load()
		next := max(time.Now().UnixMicro(), last+1)
		if d.stamped.CompareAndSwap(last, next) {
			return next
		}
	}
}

// Listening is true once a quorum of the masters' subscriptions is live:
// subscribing then costs no round trip.
func (d *redlock) Listening() bool {
	ok, _ := d.live()
	return ok
}

// Close stops the subscriptions; it closes the clients only if Open made
// them. First it waits, until ctx ends, for the background work on the
// masters' late replies (a release sent once a late grant landed) and
// release retries, which give up at once if it is to close the clients.
// The crew's idle goroutines leave with it.
func (d *redlock) Close(ctx context.Context) error {
	drivers.Delete(d.id)
	if d.cfg.ownClients {
		d.halt()
	}
	d.bgMu.Lock()
	d.closed = true
	d.bgMu.Unlock()
	done := make(chan struct{})
	go func() { d.bg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	d.crew.stop()
	d.listening.Do(func() {}) // no subscription starts after this
	var errs []error
	for _, m := range d.masters {
		if m.ps != nil {
			close(m.quit)
			_ = m.ps.Close()
			<-m.done
		}
		if d.cfg.ownClients {
			errs = append(errs, m.client.Close())
		}
	}
	return errors.Join(errs...)
}

// goBG runs f in the background, counted in bg until Close, which waits
// for it; after Close, on its own.
func (d *redlock) goBG(f func()) {
	d.bgMu.Lock()
	defer d.bgMu.Unlock()
	if d.closed {
		go f()
		return
	}
	d.bg.Go(f)
}
