package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// Defaults of the adapter options.
const (
	DefaultRoot           = "/locker"
	DefaultSessionTimeout = 10 * time.Second
)

const (
	cleanupTimeout = 2 * time.Second  // a failed Lock's wait for its node's delete
	openTimeout    = 10 * time.Second // a new session's connect, if S is shorter
	idleTimeout    = time.Minute      // before an unused extra session is closed
)

type config struct {
	root           string
	acl            []zk.ACL
	sessionTimeout time.Duration
	idle           time.Duration // see idleTimeout
	logger         *slog.Logger
}

// Option configures a Locker made by New.
type Option func(*config)

// WithRoot sets the node under which lock nodes live (default "/locker").
// It is created, persistent, when first needed.
func WithRoot(path string) Option { return func(c *config) { c.root = path } }

// WithACL sets the ACL of the root, per-key and lock nodes (default
// zk.WorldACL(zk.PermAll)). Open sets zk.DigestACL for a URL with user:pass.
func WithACL(acl []zk.ACL) Option { return func(c *config) { c.acl = acl } }

// WithSessionTimeout tells a Locker made by New the session timeout its
// connection was opened with (default 10s), which bounds the TTLs it
// accepts: see the package documentation.
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) { c.sessionTimeout = d }
}

// WithLogger has the Locker log its rare events to l, as locker.WithLogger
// does for Open: here also a connection lost and made again within the
// session (Info), and a session expired or given up (Warn). A connection
// given to New reports no events to the Locker: only its own are logged.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// withIdleTimeout sets how long an idle extra session stays open (tests).
func withIdleTimeout(d time.Duration) Option { return func(c *config) { c.idle = d } }

// zkDriver is the driver.Driver (with Admin) over ZooKeeper sessions: one
// per rung of TTLs for a Locker from a URL, the caller's one for New.
type zkDriver struct {
	cfg     config
	primary *session // for Admin calls; never retired; the only one when pinned
	dial    *dialer  // opens sessions on demand; nil when pinned to primary
	// ctx ends at Close: it stops sessions being opened, the monitors and
	// the clean-ups.
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	sessions   map[time.Duration]*slot  // by granted timeout (dial != nil)
	minS, maxS time.Duration            // the server's session timeout bounds, once learned
	holds      map[*hold]struct{}       // held nodes of this Locker, for loss and Close
	orphans    map[string]chan struct{} // nodes being deleted in the background; closed when done

	// parked (guarded by mu): by key node, the watch that a stopped Watch
	// left set, for the next Watch of the node to take over (watch.go)
	parked map[string]<-chan zk.Event

	// raised: keys found raised, made with a plain create; multiOff: the
	// multi that makes a node alone in one round trip failed (alone.go)
	raised   raisedKeys
	multiOff atomic.Bool
	armDelay time.Duration
	driver.Log
}

var (
	_ driver.Driver  = (*zkDriver)(nil)
	_ driver.Admin   = (*zkDriver)(nil)
	_ driver.Watcher = (*zkDriver)(nil)
)

// New returns a Locker over conn, a connection made with zk.Connect: one
// session, whose timeout bounds the TTLs it accepts (TTL >= session
// timeout). Pass WithSessionTimeout with the timeout conn was made with.
// Close does not close conn.
func New(conn *zk.Conn, opts ...Option) (locker.Locker, error) {
	if conn == nil {
		return nil, errors.New("locker/zookeeper: New with a nil connection")
	}
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	return newDriver(newSession(conn, cfg.sessionTimeout, false), nil, cfg).locker(), nil
}

// locker is the portable Locker over z, configured by z's options.
func (z *zkDriver) locker() locker.Locker { return locker.New(z, locker.WithLogger(z.cfg.logger)) }

// configure applies opts to the defaults and checks the result.
func configure(opts []Option) (config, error) {
	cfg := config{root: DefaultRoot, acl: zk.WorldACL(zk.PermAll), sessionTimeout: DefaultSessionTimeout, idle: idleTimeout}
	for _, opt := range opts {
		opt(&cfg)
	}
	if err := checkRoot(cfg.root); err != nil {
		return config{}, err
	}
	if cfg.sessionTimeout <= 0 {
		return config{}, fmt.Errorf("locker/zookeeper: session timeout %v is not positive", cfg.sessionTimeout)
	}
	if len(cfg.acl) == 0 {
		return config{}, errors.New("locker/zookeeper: empty ACL")
	}
	return cfg, nil
}

// newDriver returns a driver over primary, a session just made; with a
// dialer it opens further sessions as TTLs need them.
func newDriver(primary *session, d *dialer, cfg config) *zkDriver {
	z := &zkDriver{cfg: cfg, primary: primary, dial: d, armDelay: armDelay,
		sessions: map[time.Duration]*slot{}, holds: map[*hold]struct{}{}, orphans: map[string]chan struct{}{}}
	z.ctx, z.cancel = context.WithCancel(context.Background())
	if d != nil {
		sl := &slot{ready: make(chan struct{})}
		z.register(sl, primary)
		close(sl.ready)
	}
	z.adopt(primary)
	go z.monitor(primary)
	return z
}

// checkRoot accepts an absolute, clean node path that ZooKeeper allows.
func checkRoot(root string) error {
	if !strings.HasPrefix(root, "/") || root == "/" || strings.HasSuffix(root, "/") {
		return fmt.Errorf("locker/zookeeper: root %q must be an absolute node path other than /", root)
	}
	for _, seg := range strings.Split(root[1:], "/") {
		bad := seg == "" || seg == "." || seg == ".." || !utf8.ValidString(seg)
		for _, r := range seg {
			bad = bad || r != '%' && needsEscape(r)
		}
		if bad {
			return fmt.Errorf("locker/zookeeper: root %q has an invalid segment %q", root, seg)
		}
	}
	return nil
}

// Close runs once the portable Locker has released the leases it could:
// it deletes the nodes of holds whose release failed, within ctx, and
// closes the sessions it opened (not New's connection).
func (z *zkDriver) Close(ctx context.Context) error {
	z.mu.Lock()
	left := slices.Collect(maps.Keys(z.holds))
	z.mu.Unlock()
	for _, h := range left {
		z.lose(h, true)
	}
	z.awaitOrphans(ctx) // the session may outlive the Locker (New)
	z.cancel()
	z.mu.Lock()
	open := map[*session]bool{z.primary: true}
	for _, sl := range z.sessions {
		select {
		case <-sl.ready:
			open[sl.s] = sl.s != nil && !sl.s.closed
		default: // still connecting: it closes itself, seeing z.ctx ended
		}
	}
	z.mu.Unlock()
	for s, ok := range open {
		if ok && s.own {
			s.conn.Close() // ends the session: the server drops anything left
		}
	}
	return nil
}
