package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/lease"
)

// Defaults of the adapter options.
const (
	DefaultRoot           = "/locker"
	DefaultSessionTimeout = 10 * time.Second
)

// cleanupTimeout bounds how long a failed or abandoned Lock waits for its
// queue node to be deleted before returning; the delete goes on after it.
const cleanupTimeout = 2 * time.Second

// closeTimeout bounds how long Close spends unlocking held leases.
const closeTimeout = 5 * time.Second

type config struct {
	root           string
	acl            []zk.ACL
	sessionTimeout time.Duration
	ownConn        bool          // Close closes the connection (Open made it)
	negotiated     *atomic.Int64 // the server's session timeout, if known (Open)
}

// Option configures a Locker made by New.
type Option func(*config)

// WithRoot sets the node under which lock nodes live (default "/locker").
// It is created, persistent, when first needed.
func WithRoot(path string) Option { return func(c *config) { c.root = path } }

// WithACL sets the ACL of the root, per-key and lock nodes (default
// zk.WorldACL(zk.PermAll)). Open sets zk.DigestACL for a URL with user:pass.
func WithACL(acl []zk.ACL) Option { return func(c *config) { c.acl = acl } }

// WithSessionTimeout tells the Locker the session timeout its connection
// was opened with (default 10s), which bounds the TTLs it accepts: see the
// package documentation.
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) { c.sessionTimeout = d }
}

func withOwnConn(negotiated *atomic.Int64) Option {
	return func(c *config) { c.ownConn, c.negotiated = true, negotiated }
}

// Locker is a locker.Locker and locker.Admin over one ZooKeeper session.
type Locker struct {
	conn *zk.Conn
	cfg  config
	set  *lease.Set
	quit chan struct{} // closed by Close; ends the session monitor and reapers

	negotiated  *atomic.Int64 // nanoseconds; 0 while unknown
	lastContact atomic.Int64  // unix nanos when the last answered request was sent

	mu      sync.Mutex
	holds   map[holdKey]*hold        // held nodes of this Locker, for re-entry and loss
	orphans map[string]chan struct{} // nodes being deleted in the background; closed when done
}

var (
	_ locker.Locker = (*Locker)(nil)
	_ locker.Admin  = (*Locker)(nil)
)

// New returns a Locker over conn, a connection made with zk.Connect. Pass
// WithSessionTimeout with the timeout conn was made with. Close does not
// close conn.
func New(conn *zk.Conn, opts ...Option) (locker.Locker, error) {
	return newLocker(conn, opts...)
}

func newLocker(conn *zk.Conn, opts ...Option) (*Locker, error) {
	if conn == nil {
		return nil, errors.New("locker/zookeeper: New with a nil connection")
	}
	cfg := config{root: DefaultRoot, acl: zk.WorldACL(zk.PermAll), sessionTimeout: DefaultSessionTimeout}
	for _, opt := range opts {
		opt(&cfg)
	}
	if err := checkRoot(cfg.root); err != nil {
		return nil, err
	}
	if cfg.sessionTimeout <= 0 {
		return nil, fmt.Errorf("locker/zookeeper: session timeout %v is not positive", cfg.sessionTimeout)
	}
	if len(cfg.acl) == 0 {
		return nil, errors.New("locker/zookeeper: empty ACL")
	}
	z := &Locker{conn: conn, cfg: cfg, set: lease.NewSet(), quit: make(chan struct{}), holds: map[holdKey]*hold{}, orphans: map[string]chan struct{}{}}
	z.negotiated = cfg.negotiated
	if z.negotiated == nil {
		z.negotiated = new(atomic.Int64)
	}
	z.contact(time.Now()) // New and Open are given a connection with a session
	go z.monitor()
	return z, nil
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

// Close unlocks the held leases best-effort, ends waiting Lock calls with
// ErrClosed, and closes the connection if Open made it.
func (z *Locker) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := z.set.Close(ctx); err != nil {
		return err
	}
	z.mu.Lock() // holds whose release failed: delete their nodes in the background
	left := make([]*hold, 0, len(z.holds))
	for _, h := range z.holds {
		left = append(left, h)
	}
	z.mu.Unlock()
	for _, h := range left {
		z.lose(h, true)
	}
	z.awaitOrphans(ctx) // the session may outlive the Locker (New)
	close(z.quit)
	if z.cfg.ownConn {
		z.conn.Close() // ends the session: the server drops anything left
	}
	return nil
}
