package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

type holdKey struct{ key, owner string }

// hold is one lock node of ours that is first in its queue. Re-entry by
// the same owner through the same Locker adds a hold to it; each lease
// drops one, and the last deletes the node.
type hold struct {
	key, owner, path string
	fence            uint64
	s                *session      // the session the node lives in
	session          int64         // its id when the node was made
	gone             chan struct{} // closed when the hold ends; stops its watcher
	lost             chan struct{} // closed when it ends lost: every lease's Grant.Lost

	// guarded by zkDriver.mu
	count     int
	releasing bool // our own delete is under way: its watch event is no loss
	ended     bool
}

// newHold records n as held and watches it: when it is deleted by anyone
// but us (ForceUnlock) or dies with the session, its leases are lost.
func (z *zkDriver) newHold(s *session, key, owner string, n *node) *hold {
	h := &hold{key: key, owner: owner, path: n.fullPath(), fence: uint64(n.czxid), s: s, session: n.session,
		gone: make(chan struct{}), lost: make(chan struct{})}
	z.mu.Lock()
	s.users++ // until the hold ends
	// Any earlier hold of this key and owner is ending: its node's deletion
	// is what let n through, and endLocked deletes only its own entry.
	z.holds[holdKey{key, owner}] = h
	z.mu.Unlock()
	go z.watchHold(h, n.watch)
	return h
}

// grant adds one hold to h, for r; errGone if h ended. The grant's Lost is
// h's: a hold shared by re-entered leases ends all of them when lost.
func (z *zkDriver) grant(h *hold, r *driver.Request) (driver.Grant, error) {
	z.mu.Lock()
	if h.ended || h.releasing {
		z.mu.Unlock()
		return driver.Grant{}, errGone
	}
	h.count++
	z.mu.Unlock()
	ops := &leaseOps{z: z, h: h, ttl: r.TTL, keepAlive: r.KeepAlive}
	g := driver.Grant{Hold: ops, Fence: h.fence, Lost: h.lost}
	if r.KeepAlive {
		// Good for S/2 from the last request the server answered; the
		// renewals (every S/4) then prove the session alive again.
		g.Start = time.Now()
		g.Validity = max(ops.validity()-h.s.sinceContact(), time.Millisecond)
	}
	return g, nil
}

// reenter adds a hold to the node this owner already holds through this
// Locker, after checking that the node is still ours. It returns a grant
// without a hold when there is none, and the caller queues. The node lives as long as
// its session, so a TTL below that session's timeout is refused.
func (z *zkDriver) reenter(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	z.mu.Lock()
	h := z.holds[holdKey{r.Key, r.Owner}]
	z.mu.Unlock()
	if h == nil {
		return driver.Grant{}, nil
	}
	if _, long := h.s.timeouts(); r.TTL < long {
		return driver.Grant{}, fmt.Errorf("%w: TTL %v is below the session timeout %v of the node through which owner %q already "+
			"holds the key, for which the server keeps it if this process crashes: re-enter with WithTTL(%v) or more",
			locker.ErrInvalidTTL, r.TTL, long, r.Owner, long)
	}
	st, err := call(ctx, func() (*zk.Stat, error) { return h.s.stat(h.path) })
	if err != nil {
		return driver.Grant{}, backendErr("check held node", err)
	}
	if st == nil || st.EphemeralOwner != h.session {
		z.lose(h, false)
		return driver.Grant{}, nil
	}
	g, err := z.grant(h, r)
	if errors.Is(err, errGone) {
		return driver.Grant{}, nil
	}
	return g, err
}

// stat returns path's Stat, or nil if it does not exist.
func (s *session) stat(path string) (*zk.Stat, error) {
	ok, st, err := s.conn.Exists(path)
	if !ok {
		st = nil
	}
	return st, err
}

// drop releases one hold of h; the last deletes the node.
func (z *zkDriver) drop(ctx context.Context, h *hold) error {
	z.mu.Lock()
	if h.ended {
		z.mu.Unlock()
		return locker.ErrNotHeld
	}
	if h.count--; h.count > 0 {
		z.mu.Unlock()
		return nil
	}
	h.releasing = true
	z.mu.Unlock()
	_, err := call(ctx, func() (struct{}, error) { return struct{}{}, h.s.conn.Delete(h.path, -1) })
	switch {
	case err == nil:
		z.end(h)
		return nil
	case errors.Is(err, zk.ErrNoNode):
		z.end(h)
		return locker.ErrNotHeld
	}
	// No answer: the delete may have landed, and its watch event been
	// passed over as our own. Do not go on as holder of a node that may be
	// gone: give the hold up, report the lease lost, and let the orphan
	// clean-up make sure the node goes.
	z.mu.Lock()
	h.releasing = false
	z.mu.Unlock()
	z.lose(h, true)
	return backendErr("delete lock node", err)
}

// end marks h over and forgets it.
func (z *zkDriver) end(h *hold) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.endLocked(h)
}

func (z *zkDriver) endLocked(h *hold) {
	if h.ended {
		return
	}
	h.ended = true
	if z.holds[holdKey{h.key, h.owner}] == h {
		delete(z.holds, holdKey{h.key, h.owner})
	}
	z.putLocked(h.s)
	close(h.gone)
}

// lose ends h as lost, unless our own release is deleting it. With discard,
// the node may still exist (the session may yet recover), so it is deleted
// in the background.
func (z *zkDriver) lose(h *hold, discard bool) {
	z.mu.Lock()
	if h.releasing || h.ended {
		z.mu.Unlock()
		return
	}
	z.endLocked(h)
	z.mu.Unlock()
	close(h.lost)
	if discard {
		z.orphan(h.s, h.path, h.session)
	}
}

// watchHold waits for h's node to be deleted or its session to end.
func (z *zkDriver) watchHold(h *hold, ch <-chan zk.Event) {
	for {
		select {
		case <-h.gone:
			return
		case ev := <-ch:
			if ev.Type == zk.EventNodeDataChanged { // nobody should write it; keep watching
				ok, _, next, err := h.s.conn.ExistsW(h.path)
				if err == nil && ok {
					ch = next
					continue
				}
			}
			z.lose(h, false)
			return
		}
	}
}

// leaseOps is the backend side of one lease: one hold of h.
type leaseOps struct {
	z         *zkDriver
	h         *hold
	ttl       time.Duration
	keepAlive bool
	dropped   atomic.Bool
}

// Refresh checks that the node still exists and belongs to our session.
// The server heard from the session when the check was sent, so it keeps
// the session, and the node, for S from then: a kept-alive lease is good
// for min(TTL, S/2) from the call's start, the rest of S being the margin
// for a slow clock or a late renewal. With keep-alive off the lease lasts
// its TTL, the node's planned life, and the monitor ends it early if the
// session is in doubt.
func (o *leaseOps) Refresh(ctx context.Context) (time.Duration, error) {
	sent := time.Now()
	st, err := call(ctx, func() (*zk.Stat, error) { return o.h.s.stat(o.h.path) })
	if err != nil {
		return 0, backendErr("refresh", err)
	}
	o.h.s.contact(sent)
	if st == nil || st.EphemeralOwner != o.h.session {
		return 0, locker.ErrNotHeld
	}
	return o.validity(), nil
}

// validity is how long a refresh keeps the lease: see Refresh.
func (o *leaseOps) validity() time.Duration {
	if !o.keepAlive {
		return o.ttl
	}
	short, _ := o.h.s.timeouts()
	return min(o.ttl, short/2)
}

// Release drops this lease's hold.
func (o *leaseOps) Release(ctx context.Context) error {
	if !o.dropped.CompareAndSwap(false, true) {
		return locker.ErrNotHeld
	}
	err := o.z.drop(ctx, o.h)
	if err != nil && !errors.Is(err, locker.ErrNotHeld) {
		o.dropped.Store(false) // may be retried
	}
	return err
}

// Expire drops the hold of a lease that reached its deadline unrefreshed
// (keep-alive off): a ZooKeeper node would otherwise live on with the session.
func (o *leaseOps) Expire(ctx context.Context) {
	if !o.dropped.CompareAndSwap(false, true) {
		return
	}
	if err := o.z.drop(ctx, o.h); err != nil && !errors.Is(err, locker.ErrNotHeld) {
		o.z.lose(o.h, true) // nobody will retry: delete the node in the background
	}
}
