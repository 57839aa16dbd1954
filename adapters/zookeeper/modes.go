package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"

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
func modeOf(name string) driver.Mode { return classOf(name).mode }

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

// blockers are the nodes before name (in nodes, by sequence) whose
// removal may let it hold, none if it holds; found is false if name is
// not there. For a node in a mode of the matrix that is the last node
// before it that its mode excludes; for a Limited one, see limitBlockers.
func blockers(nodes []string, name string) (block []string, found bool) {
	c := classOf(name)
	if c.mode == driver.Limited {
		i := slices.Index(nodes, name)
		if i < 0 {
			return nil, false
		}
		return limitBlockers(nodes[:i], c), true
	}
	last, found := lastExcluded(nodes, name, c.mode)
	if last == "" {
		return nil, found
	}
	return []string{last}, found
}

// waitModal is waitTurn for a node that other holders may share: it holds
// once blockers finds none before it; it watches them until one goes (or
// is written), then lists again.
func (z *zkDriver) waitModal(ctx context.Context, s *session, n *node, children []string, try bool) (waited bool, err error) {
	kept := armed{}
	for ; ; waited = true {
		block, found := blockers(lockNodes(children), n.name)
		switch {
		case !found:
			return waited, errGone
		case len(block) == 0:
			return waited, nil
		case try:
			return waited, locker.ErrLocked
		}
		if err := n.awaitAny(ctx, s, block, kept); err != nil {
			return true, err
		}
		if children, err = s.children(ctx, n.parent); err != nil {
			return true, listErr(err)
		}
	}
}

// armed are a waiter's exists-watches that have not fired, by node name:
// a Limited waiter's window slides by one node at a time, and only the
// new one needs a watch.
type armed map[string]<-chan zk.Event

// awaitAny watches names, nodes before n in its queue (the watches kept
// from earlier waits, and new ones set now), and waits until one of them
// goes or is written (at once if one is gone already), n's own node
// changes, or ctx ends.
func (n *node) awaitAny(ctx context.Context, s *session, names []string, kept armed) error {
	maps.DeleteFunc(kept, func(name string, _ <-chan zk.Event) bool { return !slices.Contains(names, name) })
	if err := n.arm(ctx, s, names, kept); err != nil || len(kept) < len(names) {
		return err // or one is gone: list again
	}
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(n.watch)},
	}
	for _, name := range names {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(kept[name])})
	}
	chosen, v, _ := reflect.Select(cases)
	var ev zk.Event // the zero Event if the channel closed
	if v.IsValid() && chosen > 0 {
		ev, _ = v.Interface().(zk.Event)
	}
	switch chosen {
	case 0: // waiting behind a holder
		return fmt.Errorf("%w: %w", locker.ErrLocked, ctx.Err())
	case 1:
		return n.ownEvent(ctx, s, ev)
	}
	delete(kept, names[chosen-2]) // fired: set again if still needed
	n.touched = n.touched || ev.Type == zk.EventNodeDataChanged
	return nil
}

// arm sets exists-watches, in parallel, on those of names under n.parent
// that kept has none for, and adds those whose node exists to kept.
func (n *node) arm(ctx context.Context, s *session, names []string, kept armed) error {
	fresh := slices.DeleteFunc(slices.Clone(names), func(name string) bool { return kept[name] != nil })
	if len(fresh) == 0 {
		return nil
	}
	type watch struct {
		ok bool
		st *zk.Stat
		ch <-chan zk.Event
	}
	ws, err := ask(ctx, s, func() ([]watch, error) {
		ws, errs := make([]watch, len(fresh)), make([]error, len(fresh))
		var wg sync.WaitGroup
		for i, name := range fresh[1:] {
			wg.Go(func() { ws[i+1].ok, ws[i+1].st, ws[i+1].ch, errs[i+1] = s.existsW(n.parent + "/" + name) })
		}
		ws[0].ok, ws[0].st, ws[0].ch, errs[0] = s.existsW(n.parent + "/" + fresh[0])
		wg.Wait()
		return ws, errors.Join(errs...)
	})
	if err != nil {
		return backendErr("watch predecessor", err)
	}
	for i, w := range ws {
		n.touched = n.touched || touched(w.st) // a raise's touch (floor.go)
		if w.ok {
			kept[fresh[i]] = w.ch
		}
	}
	return nil
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
