package zookeeper

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/backoff"
)

// A lock node is named "_c_<guid>-lock-<sequence>", as in Curator.
const (
	protectedPrefix = "_c_"
	lockInfix       = "-lock-"
	seqDigits       = 10 // ZooKeeper's sequence suffix is %010d
	maxAttempts     = 5  // of one create after lost replies
)

// errGone says our node vanished (its session expired): queue again.
var errGone = errors.New("locker/zookeeper: queue node vanished")

// node is our entry in a key's queue.
type node struct {
	parent, name, path string
	fence              uint64 // its czxid
	offset             int64  // the key's fence offset as it was granted (floor.go)
	// floored: the key had an offset when the node was made; touched: a
	// first raise since may have given it one. Either: read it again at a
	// grant after a wait.
	floored, touched bool
	session          int64           // the ephemeral owner: our session when created
	watch            <-chan zk.Event // exists-watch on the node itself
	// changed: the queue changed between our create and its first listing
	// (a holder may have come and gone unseen: see refence).
	changed bool
}

// Acquire enters r's key's queue: a Lock returns once our node is first
// (the driver queues by itself), a TryLock refuses unless it is at once.
func (z *zkDriver) Acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	return persist(ctx, r, func(ctx context.Context) (driver.Grant, error) { return z.acquire(ctx, r) })
}

// persist makes attempt once for a TryLock. A Lock waits out a lost
// connection (a partition that heals, a session that expired and is made
// anew) for up to its TTL, rather than failing at its first attempt.
func persist(ctx context.Context, r *driver.Request, attempt func(context.Context) (driver.Grant, error)) (driver.Grant, error) {
	if !r.Wait {
		return attempt(ctx)
	}
	var (
		g   driver.Grant
		err error
	)
	p := backoff.Policy{Min: 20 * time.Millisecond, Max: time.Second, Until: time.Now().Add(r.TTL)}
	backoff.Retry(ctx, p, func(ctx context.Context) bool {
		g, err = attempt(ctx)
		return !connErr(err)
	})
	return g, err
}

// acquire makes one attempt: a session, then the queue.
func (z *zkDriver) acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	if err := z.RaiseFence(ctx, r.Space, r.Key, r.Floor); err != nil { // a Migration's: 0 for others
		return driver.Grant{}, err
	}
	s, err := z.session(ctx, r.TTL)
	if err != nil {
		return driver.Grant{}, err
	}
	defer z.put(s)
	for {
		g, err := z.queue(ctx, s, r)
		if !errors.Is(err, errGone) {
			return g, err
		}
	}
}

// Abandon has nothing to undo: a failed or refused Acquire deletes its
// node before returning.
func (z *zkDriver) Abandon(context.Context, *driver.Request) {}

// queue enters the key's queue once, and grants r the key when our node is
// first; anything else deletes our node. errGone: queue again.
func (z *zkDriver) queue(ctx context.Context, s *session, r *driver.Request) (driver.Grant, error) {
	n, children, err := z.enqueue(ctx, s, z.parent(r.Space, r.Key), z.floorPath(r.Space, r.Key), r.Owner, classFor(r).tag())
	if err != nil {
		return driver.Grant{}, err
	}
	wait := z.waitTurn
	if r.Mode != driver.Exclusive {
		wait = z.waitModal
	}
	waited := false
	if err = mismatch(r, children, n.name); err == nil { // else our node goes
		waited, err = wait(ctx, s, n, children, !r.Wait)
	}
	if err == nil { // a touch pending on our node's watch: a first raise since it was made
		err = n.takeOwnEvents(ctx, s)
	}
	refenced := err == nil && (waited || n.changed) && !driver.Leaf(r.Space, r.Key)
	if refenced {
		err = z.refence(ctx, s, n)
	}
	// The offset as of the grant, read after it: on a key that had one
	// (the read beside the listing may have come before a raise that came
	// before the release that made our node first), and wherever a first
	// raise touched our node since it was made, even where the listing
	// found it first (the raise and the release both landed between our
	// node's create and our listing).
	if err == nil && (n.touched || n.floored) {
		n.offset, err = readFloor(ctx, s, z.floorPath(r.Space, r.Key))
	}
	switch {
	case errors.Is(err, errGone):
		return driver.Grant{}, err
	case err != nil:
		bounded(z.orphan(s, n.path, n.session))
		if errors.Is(err, locker.ErrLocked) && !r.Wait {
			return driver.Grant{}, nil // refused
		}
		return driver.Grant{}, err
	}
	n.fence += uint64(n.offset)
	return z.grant(z.newHold(s, n), r)
}

// enqueue creates our node under parent, its class in tag (see class).
// Made alone (alone.go), it is first: else it lists the queue, watches our
// node and, unless the multi made it, reads the key's fence offset (at
// floor) in parallel.
func (z *zkDriver) enqueue(ctx context.Context, s *session, parent, floor, owner, tag string) (*node, []string, error) {
	m, err := z.create(ctx, s, parent, floor, owner, tag)
	if err != nil {
		return nil, nil, err
	}
	path := m.path
	if hook := testHookAfterCreate.Load(); hook != nil {
		(*hook)(path)
	}
	if m.alone() { // its watch is set armDelay later, if still held (armLater)
		n := &node{parent: parent, name: path[len(parent)+1:], path: path, fence: uint64(m.key.Mzxid), session: m.session}
		return n, []string{n.name}, nil
	}
	var (
		children []string
		stat     *zk.Stat
		list     *zk.Stat
		watch    <-chan zk.Event
	)
	var offset []byte
	exists, err := ask(ctx, s, func() (exists bool, err error) {
		var werr, ferr error
		var wg sync.WaitGroup
		wg.Go(func() { exists, stat, watch, werr = s.existsW(path) })
		if m.key == nil { // else the key had no offset when our node was made
			wg.Go(func() {
				if offset, _, ferr = s.conn.Get(floor); errors.Is(ferr, zk.ErrNoNode) {
					offset, ferr = nil, nil
				}
			})
		}
		if hook := testHookBeforeListing.Load(); hook != nil {
			wg.Wait() // the offset read, and our node's watch set, before others' writes
			(*hook)(path)
		}
		children, list, err = s.conn.Children(parent)
		wg.Wait()
		return exists, errors.Join(err, werr, ferr)
	})
	if err != nil {
		bounded(z.orphan(s, path, s.conn.SessionID()))
		return nil, nil, backendErr("list queue", err)
	}
	if !exists {
		return nil, nil, errGone
	}
	// A raise's touch of our node before our watch on it was set shows
	// as a write (floor.go): the watch will not fire for it.
	n := &node{parent: parent, name: path[len(parent)+1:], path: path, fence: uint64(stat.Czxid), session: stat.EphemeralOwner, watch: watch,
		changed: list.Pzxid > stat.Czxid, touched: touched(stat)}
	if n.floored = len(offset) > 0; n.floored {
		z.raised.add(floor)
		if n.offset, err = strconv.ParseInt(string(offset), 10, 64); err != nil {
			return nil, nil, backendErr("read fence offset", err)
		}
	}
	return n, children, nil
}

// create makes our node under parent and returns its path. Its name
// carries a GUID, so a create whose reply was lost is found again rather
// than left to block the key.
func (z *zkDriver) create(ctx context.Context, s *session, parent, floor, owner, tag string) (made, error) {
	prefix := protectedPrefix + strings.ToLower(rand.Text()) + tag + lockInfix
	var m made
	var last error
	for attempt := 0; m.path == ""; attempt++ {
		if attempt == maxAttempts {
			return made{}, backendErr("create lock node", last)
		}
		res := make(chan made, 1)
		session := s.conn.SessionID()
		go func() { res <- z.make(s, parent, floor, parent+"/"+prefix, owner) }()
		var r made
		select {
		case r = <-res:
		case <-ctx.Done():
			bounded(z.abandon(s, parent, prefix, session, res))
			return made{}, ctx.Err()
		}
		last = r.err
		switch {
		case r.err == nil:
			m = r
		case errors.Is(r.err, zk.ErrNoNode):
			if err := z.ensureParent(ctx, s, parent); err != nil {
				return made{}, err
			}
		case errors.Is(r.err, zk.ErrConnectionClosed):
			p, err := call(ctx, func() (string, error) { return s.find(parent, prefix) })
			if err != nil {
				res <- r // for abandon, which finds the node again
				bounded(z.abandon(s, parent, prefix, session, res))
				return made{}, backendErr("find lock node", err)
			}
			m.path = p
		case errors.Is(r.err, zk.ErrSessionExpired):
			// The node died with the session, if it was made: create again.
		default:
			return made{}, backendErr("create lock node", r.err)
		}
	}
	return m, nil
}

// waitTurn returns nil once n is first in its queue. A waiter watches its
// predecessor and, while that one is not yet first, the node before it (a
// release wakes at most two clients); once a listing shows the predecessor
// first, its deletion alone makes us first, with no further round trip.
func (z *zkDriver) waitTurn(ctx context.Context, s *session, n *node, children []string, try bool) (waited bool, err error) {
	var kept watches // the predecessor's watch, still armed, for the next turn
	for ; ; waited = true {
		pred, prev, found := predecessors(children, n.name)
		switch {
		case !found:
			return waited, errGone
		case pred == "":
			return waited, nil
		case try:
			return waited, locker.ErrLocked
		}
		w := kept
		if pred != kept.name || prev != "" {
			if hook := testHookBeforeWatch.Load(); hook != nil {
				(*hook)(n.parent + "/" + pred)
			}
			var err error
			if w, err = ask(ctx, s, func() (watches, error) { return s.watch(n.parent, pred, prev) }); err != nil {
				return true, backendErr("watch predecessor", err)
			}
		}
		n.touched = n.touched || w.touched
		kept = watches{}
		if w.pred {
			kept = watches{name: pred, pred: true, predCh: w.predCh}
		}
		if !w.pred && prev == "" {
			return true, nil
		}
		if w.pred && (prev == "" || w.prev) {
			if hook := testHookBeforeWait.Load(); hook != nil {
				(*hook)(n, w.predCh)
			}
			select {
			case ev := <-w.predCh:
				kept = watches{}
				if ev.Type == zk.EventNodeDeleted && prev == "" {
					return true, nil
				}
				n.touched = n.touched || ev.Type == zk.EventNodeDataChanged
			case ev := <-w.prevCh: // list again while the predecessor holds
				n.touched = n.touched || ev.Type == zk.EventNodeDataChanged
			case ev := <-n.watch:
				if err := n.ownEvent(ctx, s, ev); err != nil {
					return true, err
				}
			case <-ctx.Done(): // waiting behind a holder
				return true, fmt.Errorf("%w: %w", locker.ErrLocked, ctx.Err())
			}
		}
		if children, err = s.children(ctx, n.parent); err != nil {
			return true, listErr(err)
		}
	}
}

// testHookAfterCreate, if set, runs once our node is made, before the
// queue is listed (a test lands writes of others' in between).
var testHookAfterCreate atomic.Pointer[func(path string)]

// testHookBeforeListing, if set, runs once the key's offset is read and
// our node's watch set, before the queue is listed.
var testHookBeforeListing atomic.Pointer[func(path string)]

// testHookBeforeWatch, if set, runs as waitTurn is about to watch the
// predecessor at path, listed (a test deletes it meanwhile).
var testHookBeforeWatch atomic.Pointer[func(path string)]

// testHookBeforeWait, if set, runs as waitTurn is about to wait for its
// predecessor's event (a test makes events arrive meanwhile).
var testHookBeforeWait atomic.Pointer[func(n *node, pred <-chan zk.Event)]

// listErr maps the failure of a queue's listing: errGone if the key's
// node is gone (and our node with it).
func listErr(err error) error {
	if errors.Is(err, zk.ErrNoNode) {
		return errGone
	}
	return backendErr("list queue", err)
}

// watches are waitTurn's exists-watches, and whether each node existed.
type watches struct {
	name           string // the predecessor's
	pred, prev     bool
	predCh, prevCh <-chan zk.Event
	touched        bool // either was written since made: a raise's touch (floor.go)
}

// watch sets the watches of waitTurn, in parallel; prev may be "".
func (s *session) watch(parent, pred, prev string) (watches, error) {
	w := watches{name: pred}
	var perr error
	var wg sync.WaitGroup
	var pst, st *zk.Stat
	if prev != "" {
		wg.Go(func() { w.prev, pst, w.prevCh, perr = s.existsW(parent + "/" + prev) })
	}
	var err error
	w.pred, st, w.predCh, err = s.existsW(parent + "/" + pred)
	wg.Wait()
	w.touched = touched(st) || touched(pst)
	return w, errors.Join(err, perr)
}

// predecessors returns the lock nodes just before name and before that
// ("" where there is none), and whether name is in children at all.
func predecessors(children []string, name string) (pred, prev string, found bool) {
	nodes := lockNodes(children)
	i := slices.Index(nodes, name)
	if i > 0 {
		pred = nodes[i-1]
	}
	if i > 1 {
		prev = nodes[i-2]
	}
	return pred, prev, i >= 0
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
	out := slices.DeleteFunc(slices.Clone(children), func(c string) bool {
		_, ok := sequence(c)
		return !ok
	})
	slices.SortFunc(out, func(a, b string) int {
		x, _ := sequence(a)
		y, _ := sequence(b)
		return cmp.Compare(x, y)
	})
	return out
}

// ensureParent creates the key's container node, and the root above it if
// missing.
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

// find looks for the node named with prefix after a create whose reply was
// lost; Sync first, so the server has seen the create if it happened.
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
