package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker/driver"
)

var _ driver.FenceFloorer = (*zkDriver)(nil)

// Fence floors. A fence is a zxid (the node's czxid, or a write's for a
// subtree node granted after a wait), and zxids cannot be raised; so a key
// whose fences were raised keeps an offset in a persistent node beside the
// key nodes, "%F" + the key node's name (no escaped key begins with '%',
// escape writing it as "%25"), that only grows, and a fence is its zxid
// plus the offset read once the node was granted (after the listing that
// finds it first at once, or after the wait), when a raise made before
// the release that made it first is visible (a server applies writes in
// zxid order, the delete after the raise). zxids and
// offsets only grow and a key's nodes are granted in order, so its fences
// rise; an offset raised to a floor puts every later fence above it.
//
// A key never raised costs nothing more: the multi that makes a node
// shows the key without an offset (alone.go), else the offset is read
// with the listing a node makes anyway (whether the key has one); and again
// at the grant, after it, where the key had one, or where its first raise
// touched the node's queue since, even if the listing found it first.
// That first raise writes every node of the queue (the same data), so
// that each waiter's watch on the nodes before it fires, or finds them
// written when it is set (Version > 0): it then reads the offset too.

// floorPath is the offset node of key in space.
func (z *zkDriver) floorPath(space driver.Space, key string) string {
	return z.cfg.root + "/%F" + strings.TrimPrefix(z.parent(space, key), z.cfg.root+"/")
}

// readFloor reads the offset at path (0 if there is none).
func readFloor(ctx context.Context, s *session, path string) (int64, error) {
	data, err := ask(ctx, s, func() ([]byte, error) {
		data, _, err := s.conn.Get(path)
		return data, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return 0, nil
	case err != nil:
		return 0, backendErr("read fence offset", err)
	}
	return strconv.ParseInt(string(data), 10, 64)
}

// errFloorRange: a floor too close to the fence's range for zxids to be
// added to it.
var errFloorRange = fmt.Errorf("locker/zookeeper: fence floor above %d: %w", int64(math.MaxInt64/2), errors.ErrUnsupported)

// RaiseFence raises key's offset to floor, so that every later fence (a
// zxid, at least 1, plus the offset) is above it.
func (z *zkDriver) RaiseFence(ctx context.Context, space driver.Space, key string, floor uint64) error {
	if floor == 0 {
		return nil
	}
	if floor > math.MaxInt64/2 {
		return errFloorRange
	}
	s, path, want := z.primary, z.floorPath(space, key), []byte(strconv.FormatUint(floor, 10))
	for {
		data, st, err := callStat(ctx, s, func() ([]byte, *zk.Stat, error) { return s.conn.Get(path) })
		switch {
		case errors.Is(err, zk.ErrNoNode):
			_, err = call(ctx, func() (string, error) { return s.conn.Create(path, want, 0, z.cfg.acl) })
			switch {
			case errors.Is(err, zk.ErrNoNode):
				if err = z.ensureRoot(ctx, s); err == nil {
					continue
				}
			case err == nil:
				z.raised.add(path)
				return z.touch(ctx, s, z.parent(space, key))
			}
		case err == nil:
			z.raised.add(path)
			if cur, perr := strconv.ParseUint(string(data), 10, 64); perr == nil && cur >= floor {
				return nil
			}
			_, err = call(ctx, func() (*zk.Stat, error) { return s.conn.Set(path, want, st.Version) })
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrBadVersion):
			continue // raced another raise: look again
		}
		return backendErr("raise fence offset", err)
	}
}

// callStat is call for a read that answers data and a Stat.
func callStat(ctx context.Context, s *session, fn func() ([]byte, *zk.Stat, error)) ([]byte, *zk.Stat, error) {
	type res struct {
		data []byte
		st   *zk.Stat
	}
	r, err := ask(ctx, s, func() (res, error) {
		data, st, err := fn()
		return res{data, st}, err
	})
	return r.data, r.st, err
}

// touch writes every node of the queue under parent with its own data,
// after a key's first raise: its waiters then read the offset (see above).
func (z *zkDriver) touch(ctx context.Context, s *session, parent string) error {
	children, err := s.children(ctx, parent)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return backendErr("list queue", err)
	}
	for _, name := range lockNodes(children) {
		path := parent + "/" + name
		_, err := call(ctx, func() (*zk.Stat, error) {
			data, st, err := s.conn.Get(path)
			if err != nil {
				return nil, err
			}
			return s.conn.Set(path, data, st.Version)
		})
		if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
			return backendErr("touch queue node", err) // gone or written meanwhile: touched enough
		}
	}
	return nil
}

// touched reports whether a node was written since it was made.
func touched(st *zk.Stat) bool { return st != nil && st.Version > 0 }

// takeOwnEvents handles the events pending on our node's watch once the
// wait is over. A raise's touch of our node comes before the deletion that
// made us first (a session's events arrive in zxid order, each put on its
// watch's channel as it comes), but the wait's select may have taken the
// deletion first: without this, the grant would miss that the key was
// raised and take a fence below the floor.
func (n *node) takeOwnEvents(ctx context.Context, s *session) error {
	for {
		select {
		case ev := <-n.watch:
			if err := n.ownEvent(ctx, s, ev); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// ownEvent handles an event of a waiter's watch on its own node: a write
// (a first raise's touch) is noted and the watch set again; anything else
// means the node is gone.
func (n *node) ownEvent(ctx context.Context, s *session, ev zk.Event) error {
	if ev.Type != zk.EventNodeDataChanged {
		return errGone // our own node was deleted
	}
	n.touched = true
	type watch struct {
		ok bool
		ch <-chan zk.Event
	}
	w, err := ask(ctx, s, func() (watch, error) {
		ok, _, ch, err := s.existsW(n.path)
		return watch{ok, ch}, err
	})
	switch {
	case err != nil:
		return backendErr("watch own node", err)
	case !w.ok:
		return errGone
	}
	n.watch = w.ch
	return nil
}
