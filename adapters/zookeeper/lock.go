package zookeeper

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/backoff"
)

const (
	// protectedPrefix marks a lock node whose name carries its creator's
	// GUID, as in Curator and go-zookeeper: "_c_<guid>-lock-<sequence>".
	protectedPrefix = "_c_"
	lockInfix       = "-lock-"
	seqDigits       = 10 // ZooKeeper's sequence suffix is %010d
	// maxAttempts bounds the retries of one create after lost replies.
	maxAttempts = 5
)

// errGone says our queue node vanished while we waited (its session
// expired): queue again.
var errGone = errors.New("locker/zookeeper: queue node vanished")

// node is our entry in a key's queue.
type node struct {
	parent, name string
	czxid        int64           // the fence
	session      int64           // the ephemeral owner: our session when created
	watch        <-chan zk.Event // exists-watch on the node itself
}

func (n *node) fullPath() string { return n.parent + "/" + n.name }

// Acquire enters r's key's queue. With r.Wait (Lock) it returns once our
// node is first: the driver queues itself, no Notifier needed. Without
// (TryLock) it refuses unless our node is first at once, and deletes it
// again. An owner that holds the key through this Locker already
// (r.Reentrant) adds a hold to that node instead.
func (z *zkDriver) Acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	if !r.Wait {
		return z.acquire(ctx, r)
	}
	// A Lock waits out a lost connection (a partition that heals, a
	// session that expired and is made anew) for up to its TTL, rather
	// than failing at its first attempt.
	var (
		g   driver.Grant
		err error
	)
	p := backoff.Policy{Min: 20 * time.Millisecond, Max: time.Second, Until: time.Now().Add(r.TTL)}
	backoff.Retry(ctx, p, func(ctx context.Context) bool {
		g, err = z.acquire(ctx, r)
		return !connErr(err)
	})
	return g, err
}

// acquire makes one attempt: a session, re-entry, then the queue.
func (z *zkDriver) acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	s, err := z.session(ctx, r.TTL)
	if err != nil {
		return driver.Grant{}, err
	}
	defer z.put(s)
	if r.Reentrant {
		g, err := z.reenter(ctx, r)
		if g.Hold != nil || err != nil {
			return g, err
		}
	}
	for {
		h, err := z.queue(ctx, s, r.Key, r.Owner, !r.Wait)
		if errors.Is(err, locker.ErrLocked) && !r.Wait {
			return driver.Grant{}, nil // refused
		}
		if err != nil {
			return driver.Grant{}, err
		}
		g, err := z.grant(h, r)
		if !errors.Is(err, errGone) {
			return g, err
		}
	}
}

// Abandon has nothing to undo: a failed or refused Acquire deletes its
// node before returning (a refused TryLock gets no Abandon), and the
// portable Locker releases a grant it cannot use.
func (z *zkDriver) Abandon(context.Context, *driver.Request) {}

// queue enters the key's queue and returns once our node is first: the
// hold. Anything else removes our node before returning.
func (z *zkDriver) queue(ctx context.Context, s *session, key, owner string, try bool) (*hold, error) {
	parent := z.cfg.root + "/" + escape(key)
	for {
		n, children, err := z.enqueue(ctx, s, parent, owner)
		if errors.Is(err, errGone) {
			continue
		}
		if err != nil {
			return nil, err
		}
		err = z.waitTurn(ctx, s, n, children, try)
		if errors.Is(err, errGone) {
			continue
		}
		if err != nil {
			bounded(z.orphan(s, n.fullPath(), n.session))
			return nil, err
		}
		return z.newHold(s, key, owner, n), nil
	}
}

// enqueue creates our ephemeral-sequential node under parent, then lists
// the queue and watches our node in parallel.
func (z *zkDriver) enqueue(ctx context.Context, s *session, parent, owner string) (*node, []string, error) {
	path, err := z.create(ctx, s, parent, owner)
	if err != nil {
		return nil, nil, err
	}
	type look struct {
		children []string
		exists   bool
		stat     *zk.Stat
		watch    <-chan zk.Event
	}
	sent := time.Now()
	lk, err := call(ctx, func() (look, error) {
		var lk look
		var werr error
		var wg sync.WaitGroup
		wg.Go(func() { lk.exists, lk.stat, lk.watch, werr = s.conn.ExistsW(path) })
		children, _, err := s.conn.Children(parent)
		lk.children = children
		wg.Wait()
		return lk, errors.Join(err, werr)
	})
	if err == nil {
		s.contact(sent)
	}
	if err == nil && !lk.exists {
		return nil, nil, errGone
	}
	if err != nil {
		bounded(z.orphan(s, path, s.conn.SessionID()))
		return nil, nil, backendErr("list queue", err)
	}
	n := &node{parent: parent, name: path[len(parent)+1:], czxid: lk.stat.Czxid, session: lk.stat.EphemeralOwner, watch: lk.watch}
	return n, lk.children, nil
}

// create makes our ephemeral-sequential node under parent and returns
// its path. The node's name carries a GUID, so a create whose reply was
// lost to a disconnect is found again instead of being left behind to
// block every later contender.
func (z *zkDriver) create(ctx context.Context, s *session, parent, owner string) (string, error) {
	prefix := protectedPrefix + strings.ToLower(rand.Text()) + lockInfix
	var path string
	var last error
	for attempt := 0; path == ""; attempt++ {
		if attempt == maxAttempts {
			return "", backendErr("create lock node", last)
		}
		res := make(chan createResult, 1)
		session := s.conn.SessionID()
		go func() {
			p, err := s.conn.Create(parent+"/"+prefix, []byte(owner), zk.FlagEphemeralSequential, z.cfg.acl)
			res <- createResult{p, err}
		}()
		var r createResult
		select {
		case r = <-res:
		case <-ctx.Done():
			bounded(z.abandon(s, parent, prefix, session, res))
			return "", ctx.Err()
		}
		last = r.err
		switch {
		case r.err == nil:
			path = r.path
		case errors.Is(r.err, zk.ErrNoNode):
			if err := z.ensureParent(ctx, s, parent); err != nil {
				return "", err
			}
		case errors.Is(r.err, zk.ErrConnectionClosed):
			p, err := call(ctx, func() (string, error) { return s.find(parent, prefix) })
			if err != nil {
				bounded(z.lostCreate(s, parent, prefix, session))
				return "", backendErr("find lock node", err)
			}
			path = p
		case errors.Is(r.err, zk.ErrSessionExpired):
			// The node died with the session, if it was made: create again.
		default:
			return "", backendErr("create lock node", r.err)
		}
	}
	return path, nil
}

type createResult struct {
	path string
	err  error
}

// waitTurn returns nil once n is first in its queue. A waiter watches its
// predecessor and, while that one is not yet first, the node before it
// too (never more, so a release wakes at most two clients, not the herd).
// When the node before the predecessor goes, the waiter lists the queue
// again, while the predecessor still holds; once a listing shows the
// predecessor first, its deletion alone makes us first (nodes created
// later have higher sequences), so the handoff costs no further round trip.
func (z *zkDriver) waitTurn(ctx context.Context, s *session, n *node, children []string, try bool) error {
	var kept watches // the predecessor's watch, still armed, for the next turn
	for {
		pred, prev, found := predecessors(children, n.name)
		switch {
		case !found:
			return errGone
		case pred == "":
			return nil
		case try:
			return locker.ErrLocked
		}
		w := kept
		if pred != kept.name || prev != "" {
			var err error
			sent := time.Now()
			w, err = call(ctx, func() (watches, error) { return s.watch(n.parent, pred, prev) })
			if err != nil {
				return backendErr("watch predecessor", err)
			}
			s.contact(sent)
		}
		kept = watches{}
		if w.pred {
			kept = watches{name: pred, pred: true, predCh: w.predCh}
		}
		if !w.pred && prev == "" {
			return nil
		}
		if w.pred && (prev == "" || w.prev) {
			select {
			case ev := <-w.predCh:
				kept = watches{}
				if ev.Type == zk.EventNodeDeleted && prev == "" {
					return nil
				}
			case <-w.prevCh: // list again while the predecessor holds
			case <-n.watch:
				return errGone // our own node was deleted
			case <-ctx.Done(): // waiting behind a holder
				return fmt.Errorf("%w: %w", locker.ErrLocked, ctx.Err())
			}
		}
		var err error
		sent := time.Now()
		children, err = call(ctx, func() ([]string, error) {
			c, _, err := s.conn.Children(n.parent)
			return c, err
		})
		if answered(err) {
			s.contact(sent)
		}
		if errors.Is(err, zk.ErrNoNode) {
			return errGone
		}
		if err != nil {
			return backendErr("list queue", err)
		}
	}
}

// watches are exists-watches on a waiter's predecessor and the node
// before it, and whether each still existed.
type watches struct {
	name           string // the predecessor's
	pred, prev     bool
	predCh, prevCh <-chan zk.Event
}

// watch sets the watches of waitTurn, in parallel; prev may be "".
func (s *session) watch(parent, pred, prev string) (watches, error) {
	w := watches{name: pred}
	var perr error
	var wg sync.WaitGroup
	if prev != "" {
		wg.Go(func() { w.prev, _, w.prevCh, perr = s.conn.ExistsW(parent + "/" + prev) })
	}
	var err error
	w.pred, _, w.predCh, err = s.conn.ExistsW(parent + "/" + pred)
	wg.Wait()
	return w, errors.Join(err, perr)
}

// predecessors returns the lock nodes just before name and before that in
// sequence order ("" where there is none), and whether name is in
// children at all.
func predecessors(children []string, name string) (pred, prev string, found bool) {
	mine, ok := sequence(name)
	if !ok || !slices.Contains(children, name) {
		return "", "", false
	}
	var p, q int64 = -1, -1
	for _, c := range children {
		s, ok := sequence(c)
		switch {
		case !ok || s >= mine:
		case s > p:
			prev, q = pred, p
			pred, p = c, s
		case s > q:
			prev, q = c, s
		}
	}
	return pred, prev, true
}

// sequence parses the sequence suffix of a lock node's name.
func sequence(name string) (int64, bool) {
	if !strings.HasPrefix(name, protectedPrefix) || len(name) < seqDigits ||
		!strings.HasSuffix(name[:len(name)-seqDigits], lockInfix) {
		return 0, false
	}
	s, err := strconv.ParseInt(name[len(name)-seqDigits:], 10, 64)
	return s, err == nil
}

// lockNodes returns the lock nodes among children, first (the holder) first.
func lockNodes(children []string) []string {
	var out []string
	for _, c := range children {
		if _, ok := sequence(c); ok {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		x, _ := sequence(a)
		y, _ := sequence(b)
		return int(x - y)
	})
	return out
}

// ensureParent creates the key's parent as a container node, which the
// server deletes once its last child is gone, so released keys leave
// nothing behind; and the root above it if missing.
func (z *zkDriver) ensureParent(ctx context.Context, s *session, parent string) error {
	create := func() (string, error) { return s.conn.CreateContainer(parent, nil, zk.FlagContainer, z.cfg.acl) }
	_, err := call(ctx, create)
	if errors.Is(err, zk.ErrNoNode) {
		if err := z.ensureRoot(ctx, s); err != nil {
			return err
		}
		_, err = call(ctx, create)
	}
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return backendErr("create key node", err)
	}
	return nil
}

// ensureRoot creates the root and its ancestors as persistent nodes.
func (z *zkDriver) ensureRoot(ctx context.Context, s *session) error {
	segs := strings.Split(z.cfg.root[1:], "/")
	for i := range segs {
		p := "/" + strings.Join(segs[:i+1], "/")
		_, err := call(ctx, func() (string, error) { return s.conn.Create(p, nil, zk.FlagPersistent, z.cfg.acl) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return backendErr("create root", err)
		}
	}
	return nil
}

// find looks for the node named with prefix (our GUID) after a create
// whose reply was lost; Sync first, so the server has seen the create if
// it happened.
func (s *session) find(parent, prefix string) (string, error) {
	if _, err := s.conn.Sync(parent); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return "", err
	}
	children, _, err := s.conn.Children(parent)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	for _, c := range children {
		if strings.HasPrefix(c, prefix) {
			return parent + "/" + c, nil
		}
	}
	return "", err
}

// ttlError explains a TTL below the timeout of s, a pinned Locker's
// session, and what to do.
func (z *zkDriver) ttlError(ttl time.Duration, s *session) error {
	_, long := s.timeouts()
	raised := ""
	if long > s.asked {
		raised = fmt.Sprintf(" (the server raised the %v asked for to its minSessionTimeout)", s.asked)
	}
	return fmt.Errorf("%w: TTL %v is below this Locker's ZooKeeper session timeout %v%s, for which the server keeps "+
		"a crashed holder's key: lock with WithTTL(%v) or more, or use a Locker whose session timeout is at most the TTL "+
		"(zk://host:port/root without session_timeout derives it from each TTL; or session_timeout=%v, "+
		"or New(conn, WithSessionTimeout(%v)) with conn from zk.Connect(servers, %v))",
		locker.ErrInvalidTTL, ttl, long, raised, long, ttl, ttl, ttl)
}
