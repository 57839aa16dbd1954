package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// Lock modes (driver.ModeKeeper): a node's mode is a tag before its
// "-lock-" infix, none for Exclusive, so that a client of an earlier
// version takes every node for an exclusive one and locks more, never
// less. A node holds the key once every node before it is compatible
// with it.
var modeTags = [...]string{
	driver.Exclusive:       "",
	driver.Shared:          "-S",
	driver.IntentShared:    "-IS",
	driver.IntentExclusive: "-IX",
}

// KeepsModes: see modeTags.
func (*zkDriver) KeepsModes() {}

// modeOf is the mode a lock node's name carries.
func modeOf(name string) driver.Mode {
	head := strings.TrimSuffix(name[:max(0, len(name)-seqDigits)], lockInfix)
	for m := len(modeTags) - 1; m > 0; m-- {
		if strings.HasSuffix(head, modeTags[m]) {
			return driver.Mode(m)
		}
	}
	return driver.Exclusive
}

// subtreeMark begins the key nodes of the Subtree space under the root:
// no escaped key begins so (escape writes '%' as "%25").
const subtreeMark = "%T"

// parent is the key node of key in space.
func (z *zkDriver) parent(space driver.Space, key string) string {
	if space == driver.Subtree {
		return z.cfg.root + "/" + subtreeMark + escape(key)
	}
	return z.cfg.root + "/" + escape(key)
}

// lastExcluded is the last lock node before name (in nodes, by sequence)
// that mode excludes, "" if none; found is false if name is not there.
func lastExcluded(nodes []string, name string, mode driver.Mode) (last string, found bool) {
	i := slices.Index(nodes, name)
	for _, n := range nodes[:max(i, 0)] {
		if !mode.Compatible(modeOf(n)) {
			last = n
		}
	}
	return last, i >= 0
}

// waitModal is waitTurn for a node that other holders may share: it holds
// once no node before it is one its mode excludes, watching the last such
// node until it goes, then listing again.
func (z *zkDriver) waitModal(ctx context.Context, s *session, n *node, children []string, try bool) (waited bool, err error) {
	mode := modeOf(n.name)
	for ; ; waited = true {
		last, found := lastExcluded(lockNodes(children), n.name, mode)
		switch {
		case !found:
			return waited, errGone
		case last == "":
			return waited, nil
		case try:
			return waited, locker.ErrLocked
		}
		var (
			exists bool
			st     *zk.Stat
			ch     <-chan zk.Event
		)
		if _, err := ask(ctx, s, func() (_ struct{}, err error) {
			exists, st, ch, err = s.conn.ExistsW(n.parent + "/" + last)
			return struct{}{}, err
		}); err != nil {
			return true, backendErr("watch predecessor", err)
		}
		n.touched = n.touched || touched(st)
		if exists {
			select {
			case ev := <-ch:
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

// refence gives a subtree node granted after a wait a fence drawn now:
// the zxid of a write to it. Its czxid may be below the fence of a lock
// granted below it meanwhile (a subtree lock's path is taken after its
// ancestors, one of which may have queued behind this node), or of one
// refenced so on its key between its create and its first listing (the
// two are not one read, as in etcd's txn: a node granted at once after
// its queue changed is refenced too); nowhere else, since the nodes of a
// key that exclude each other hold in sequence order.
func (z *zkDriver) refence(ctx context.Context, s *session, n *node) error {
	st, err := call(ctx, func() (*zk.Stat, error) {
		data, st, err := s.conn.Get(n.path)
		if err != nil {
			return nil, err
		}
		return s.conn.Set(n.path, data, st.Version)
	})
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
		return errGone
	case err != nil:
		return backendErr("fence node", err)
	}
	n.fence = uint64(st.Mzxid)
	return nil
}
