package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// hold is one lock node of ours that is first in its queue. The portable
// Locker shares it among an owner's re-entered leases (driver.Reenterer),
// each with a leaseOps of its own, and releases it with the last.
type hold struct {
	*node
	s    *session        // the session the node lives in
	gone chan struct{}   // closed when the hold ends; stops its watcher
	lost context.Context // done when it ends lost: every lease's Grant.Lost
	lose context.CancelFunc

	// guarded by zkDriver.mu
	releasing bool // our own delete is under way: its watch event is no loss
	ended     bool
	armed     bool        // a watch is set on the node (see watchNode)
	arming    *time.Timer // sets it, where the node was made without (alone.go)
}

// newHold records n as held and watches it: when it is deleted by anyone
// but us (ForceUnlock) or dies with the session, its leases are lost. A
// node made alone, without its watch, is watched from armDelay on
// (alone.go).
func (z *zkDriver) newHold(s *session, n *node) *hold {
	h := &hold{node: n, s: s, gone: make(chan struct{})}
	h.lost, h.lose = context.WithCancel(context.Background())
	z.mu.Lock()
	s.users++ // until the hold ends
	z.holds[h] = struct{}{}
	z.mu.Unlock()
	z.watchNode(h)
	return h
}

// grant is r's grant of h; errGone if h ended.
func (z *zkDriver) grant(h *hold, r *driver.Request) (driver.Grant, error) {
	z.mu.Lock()
	ended := h.ended
	z.mu.Unlock()
	if ended {
		return driver.Grant{}, errGone
	}
	ops := &leaseOps{z: z, h: h, ttl: r.TTL, keepAlive: r.KeepAlive}
	g := driver.Grant{Hold: ops, Fence: h.fence, Lost: h.lost}
	if r.KeepAlive { // see Refresh
		g.Start = time.Now()
		g.Validity = max(ops.validity()-h.s.sinceContact(), time.Millisecond)
	}
	return g, nil
}

// Reenter grants r, a re-entry, the node of o's lease if it is still ours.
// The node lives as long as its session, so a TTL below that session's
// timeout is refused.
func (o *leaseOps) Reenter(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	if _, long := o.h.s.timeouts(); r.TTL < long {
		return driver.Grant{}, ttlError(r.TTL, long, fmt.Sprintf("owner %q's hold of the key, in a session of timeout", r.Owner),
			fmt.Sprintf("re-enter with WithTTL(%v) or more", long))
	}
	return persist(ctx, r, func(ctx context.Context) (driver.Grant, error) {
		ours, err := o.h.owned(ctx, false)
		if err != nil {
			return driver.Grant{}, backendErr("check held node", err)
		}
		if !ours {
			o.z.lose(o.h, false)
			return driver.Grant{}, nil
		}
		g, err := o.z.grant(o.h, r)
		if errors.Is(err, errGone) {
			return driver.Grant{}, nil
		}
		return g, err
	})
}

// owned reports whether h's node still exists in its session; with
// watch, it also sets a watch on the node (one made alone, alone.go).
func (h *hold) owned(ctx context.Context, watch bool) (bool, error) {
	sent := time.Now()
	ours, err := call(ctx, func() (bool, error) {
		exists := h.s.conn.Exists
		if watch {
			exists = func(path string) (bool, *zk.Stat, error) {
				ok, st, _, err := h.s.existsW(path)
				return ok, st, err
			}
		}
		ok, st, err := exists(h.path)
		return ok && st.EphemeralOwner == h.session, err
	})
	if err == nil {
		h.s.contact(sent)
	}
	return ours, err
}

// drop deletes h's node. If the delete gets no answer, it may have landed
// and its watch event been passed over as our own: the hold then ends
// lost, and the orphan clean-up makes sure the node goes.
func (z *zkDriver) drop(ctx context.Context, h *hold) error {
	z.mu.Lock()
	ended := h.ended
	h.releasing = true
	z.mu.Unlock()
	if ended {
		return locker.ErrNotHeld
	}
	_, err := call(ctx, func() (struct{}, error) { return struct{}{}, h.s.conn.Delete(h.path, -1) })
	if err == nil || errors.Is(err, zk.ErrNoNode) {
		z.mu.Lock()
		z.endLocked(h)
		z.mu.Unlock()
		if err != nil {
			return locker.ErrNotHeld
		}
		return nil
	}
	z.mu.Lock()
	h.releasing = false
	z.mu.Unlock()
	z.lose(h, true)
	return backendErr("delete lock node", err)
}

// endLocked marks h over and forgets it. Callers hold z.mu.
func (z *zkDriver) endLocked(h *hold) {
	if h.ended {
		return
	}
	h.ended = true
	if h.arming != nil {
		h.arming.Stop()
	}
	delete(z.holds, h)
	if h.s.watched[h.path] == h {
		delete(h.s.watched, h.path)
	}
	z.putLocked(h.s)
	close(h.gone)
}

// lose ends h as lost, unless our own release is deleting it. With
// discard, the node may still exist, and is deleted in the background.
func (z *zkDriver) lose(h *hold, discard bool) {
	z.mu.Lock()
	if h.releasing || h.ended {
		z.mu.Unlock()
		return
	}
	z.endLocked(h)
	z.mu.Unlock()
	h.lose()
	if discard {
		z.orphan(h.s, h.path, h.session)
	}
}

// watchHold waits for h's node to be deleted or its session to end.
func (z *zkDriver) watchHold(h *hold) {
	ch := h.watch
	if ch == nil { // granted by the multi (alone.go): watched from armDelay on
		select {
		case <-h.gone:
			return
		case <-time.After(z.armDelay):
		}
		if ch = z.armHold(h); ch == nil {
			return
		}
	}
	for {
		select {
		case <-h.gone:
			return
		case ev := <-ch:
			if ev.Type == zk.EventNodeDataChanged { // nobody should write it; keep watching
				ok, _, next, err := h.s.existsW(h.path)
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

// leaseOps is the backend side of one lease on h.
type leaseOps struct {
	z         *zkDriver
	h         *hold
	ttl       time.Duration
	keepAlive bool
}

// Refresh checks that the node still exists in our session, which the
// server then keeps for S: a kept-alive lease is good for min(TTL, S/2),
// the rest being the margin for a slow clock or a late renewal. A node
// not yet watched (alone.go) is watched from this check on.
func (o *leaseOps) Refresh(ctx context.Context) (time.Duration, error) {
	o.z.mu.Lock()
	armed := o.h.armed
	o.z.mu.Unlock()
	ours, err := o.h.owned(ctx, !armed)
	if ours && !armed {
		o.z.mu.Lock()
		o.h.armed = true
		o.z.mu.Unlock()
	}
	switch {
	case err != nil:
		return 0, backendErr("refresh", err)
	case !ours:
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

// Release deletes the node.
func (o *leaseOps) Release(ctx context.Context) error { return o.z.drop(ctx, o.h) }

// Expire deletes the node of a lease past its deadline (keep-alive off),
// which would otherwise live on with the session.
func (o *leaseOps) Expire(ctx context.Context) { _ = o.z.drop(ctx, o.h) }

var _ driver.BatchRefresher = (*zkDriver)(nil)

// RefreshBatch renews kept-alive holds without a call: a node of ours
// lives as long as its session, which the session's monitor keeps in
// contact (every S/12), and its deletion by anyone else reaches the hold's
// watch, which ends it, before the answer to any later request. A hold
// not yet watched (alone.go) renews alone, which sets its watch. So a hold
// not ended is ours, valid as long as Refresh would make it, less the time
// since the session's last answered request; a session silent too long
// answers ErrUnavailable, for the lease to try again.
func (z *zkDriver) RefreshBatch(_ context.Context, hs []driver.Hold) ([]driver.Refreshed, error) {
	out := make([]driver.Refreshed, len(hs))
	z.mu.Lock()
	defer z.mu.Unlock()
	for i, dh := range hs {
		o, ok := dh.(*leaseOps)
		switch {
		case !ok || o.z != z || !o.keepAlive:
			out[i].Err = driver.ErrSkip
		case o.h.ended:
			out[i].Err = locker.ErrNotHeld
		case !o.h.armed: // Refresh sets its watch
			out[i].Err = driver.ErrSkip
		default:
			since := o.h.s.sinceContact()
			if out[i].Valid = o.validity() - since; out[i].Valid <= 0 {
				out[i].Err = locker.Unavailable(fmt.Errorf("locker/zookeeper: refresh: no answer from the server for %v", since.Round(time.Millisecond)))
			}
		}
	}
	return out, nil
}
