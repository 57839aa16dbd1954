package zookeeper

import (
	"errors"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// A Lock of a key that nobody else holds or waits for is granted in one
// round trip. Our node is made in a multi that also writes the key node,
// whose Stat it returns: one child (ours) means ours is first, and the key
// node's mzxid is our node's czxid, the fence. The same multi makes and
// deletes the key's offset node (floor.go), so it fails if the key was
// ever raised: such a key's node is made with a plain create, and its
// offset read with the listing, as before. Where the multi made our node
// behind others, the listing skips that read: the key had no offset when
// our node was made, and a raise since touches our node, which the
// listing's watch shows (floor.go). A grant from the multi sets the watch
// on our node armDelay after the grant (armLater), unless the hold ended
// by then: a lock held that briefly, as most are, costs no request for it,
// and a deletion of the node by another (ForceUnlock) meanwhile is found
// then. A renewal that comes first sets it (leaseOps.Refresh).
//
// The plain create, then the listing, costs two round trips, and the
// create and the listing's three reads four requests.

// made is the outcome of making our node: its path, and, where the multi
// made it (alone), the key node's Stat as of then and the session it lives
// in.
type made struct {
	path    string
	key     *zk.Stat
	session int64
	err     error
}

// raisedMax bounds the keys remembered as raised: past it they are
// forgotten, and each found raised again by a multi that fails.
const raisedMax = 4096

// raisedKeys remembers the offset nodes found to exist, by path: their
// keys' nodes are made with a plain create (an offset only grows, and
// its node is never deleted but by hand).
type raisedKeys struct {
	mu    sync.Mutex
	paths map[string]struct{}
}

func (r *raisedKeys) add(floor string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paths == nil || len(r.paths) >= raisedMax {
		r.paths = map[string]struct{}{}
	}
	r.paths[floor] = struct{}{}
}

func (r *raisedKeys) has(floor string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.paths[floor]
	return ok
}

// make makes our node, name being its path before the sequence, under
// parent (the key node), with the multi where it may serve: not on a key
// known to be raised, nor where the multi failed for another reason than
// the key's (its offset node's, or the key node's absence, or the
// connection's): then, on any key, from then on.
func (z *zkDriver) make(s *session, parent, floor, name, owner string) made {
	if !z.multiOff.Load() && !z.raised.has(floor) {
		sent, sid := time.Now(), s.conn.SessionID()
		rs, err := s.conn.Multi(
			&zk.CreateRequest{Path: floor, Acl: z.cfg.acl},
			&zk.DeleteRequest{Path: floor, Version: -1},
			&zk.CreateRequest{Path: name, Data: []byte(owner), Acl: z.cfg.acl, Flags: zk.FlagEphemeralSequential},
			&zk.SetDataRequest{Path: parent, Version: -1})
		if !connErr(err) {
			s.contact(sent)
		}
		switch {
		case err == nil && s.conn.SessionID() == sid:
			return made{path: rs[2].String, key: rs[3].Stat, session: sid}
		case err == nil: // its session is unsure: the listing's read tells
			return made{path: rs[2].String}
		case errors.Is(err, zk.ErrNodeExists): // the offset node: a raised key
			z.raised.add(floor)
		case errors.Is(err, zk.ErrNoNode), connErr(err):
			return made{err: err}
		default:
			if !z.multiOff.Swap(true) {
				z.Info("locker/zookeeper: locks are made with a plain create from now on", "multi", err.Error())
			}
		}
	}
	path, err := s.conn.Create(name, []byte(owner), zk.FlagEphemeralSequential, z.cfg.acl)
	return made{path: path, err: err}
}

// alone reports whether m made our node with no other in its queue.
func (m made) alone() bool { return m.key != nil && m.key.NumChildren == 1 }

// armDelay is how long a hold granted by the multi goes without its
// watch: a lock released sooner never sets one (zkDriver.armDelay, which
// tests change).
const armDelay = 50 * time.Millisecond

// armLater has armHold set the watch on h's node, granted by a multi with
// none, armDelay from now, unless h ends first: a timer, not a goroutine,
// until then (endLocked stops it). Callers hold z.mu.
func (z *zkDriver) armLater(h *hold) {
	h.arming = time.AfterFunc(z.armDelay, func() { z.armHold(h) })
}

// armHold sets the watch on h's node, granted by a multi with none, and
// returns its channel (its events also reach the session's callback, if
// it has one): nil if h ended. A node gone by then ends the hold lost, as
// its watch would have, and so does a refusal (the node is then deleted).
// While the connection fails it tries again, until the hold ends (an
// expired session ends it).
func (z *zkDriver) armHold(h *hold) <-chan zk.Event {
	wait := 20 * time.Millisecond
	for {
		ok, _, ch, err := h.s.existsW(h.path)
		switch {
		case err == nil && ok:
			z.mu.Lock()
			h.armed = true
			z.mu.Unlock()
			return ch
		case err == nil:
			z.lose(h, false)
			return nil
		case errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrClosing):
			return nil
		case !connErr(err):
			z.lose(h, true)
			return nil
		}
		select {
		case <-h.gone:
			return nil
		case <-time.After(wait):
			wait = min(2*wait, time.Second)
		}
	}
}
