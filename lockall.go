package locker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locker-go/locker/driver"
)

// LockAll takes every key of keys, all or none, waiting as Lock does: the
// i-th lease is keys[i]'s. Keys are taken in sorted order, so two LockAll
// calls never deadlock, and in one backend call where the driver can
// (driver.Batcher). On error, or when ctx ends, every key taken is
// released. Options (TTL, Shared, Subtree, ...) apply to every key. An
// empty list, a key given twice, or a subtree path within another is
// ErrInvalidKey.
func LockAll(ctx context.Context, l Locker, keys []string, opts ...Option) ([]Lease, error) {
	return lockAll(ctx, l, keys, opts, true)
}

// TryLockAll is LockAll without waiting: ErrLocked, with nothing taken,
// if any key is held by another owner.
func TryLockAll(ctx context.Context, l Locker, keys []string, opts ...Option) ([]Lease, error) {
	return lockAll(ctx, l, keys, opts, false)
}

// grouper is a Locker that takes several keys itself: the portable one.
type grouper interface {
	lockAll(ctx context.Context, keys []string, opts []Option, wait bool) ([]Lease, error)
}

func lockAll(ctx context.Context, l Locker, keys []string, opts []Option, wait bool) ([]Lease, error) {
	if g, ok := l.(grouper); ok {
		return g.lockAll(ctx, keys, opts, wait)
	}
	return lockEach(ctx, l, keys, opts, wait)
}

// lockEach is LockAll over any Locker: Lock (or TryLock) each key in
// sorted order. One owner takes them all, so that subtree paths sharing
// an ancestor re-enter it rather than queue behind a waiter for it.
func lockEach(ctx context.Context, l Locker, keys []string, opts []Option, wait bool) ([]Lease, error) {
	o, err := resolveAll(keys, opts)
	if err != nil {
		return nil, err
	}
	if !o.StableOwner {
		opts = append(slices.Clip(opts), WithOwner(o.Owner))
	}
	take := l.TryLock
	if wait {
		take = l.Lock
	}
	leases := make([]Lease, len(keys))
	for _, i := range sortedIndices(keys) {
		lease, err := take(ctx, keys[i], opts...)
		if err != nil {
			for _, l := range leases {
				if l != nil {
					_ = l.Unlock(context.WithoutCancel(ctx))
				}
			}
			return nil, err
		}
		leases[i] = lease
	}
	return leases, nil
}

// resolveAll resolves opts for a LockAll of keys: every key valid, none
// twice, no subtree path within another.
func resolveAll(keys []string, opts []Option) (Options, error) {
	if len(keys) == 0 {
		return Options{}, fmt.Errorf("%w: LockAll of no keys", ErrInvalidKey)
	}
	o, err := Resolve(keys[0], opts...)
	if err != nil {
		return Options{}, err
	}
	for _, k := range keys[1:] {
		if err := validate(k, o.Subtree); err != nil {
			return Options{}, err
		}
	}
	sorted := slices.Sorted(slices.Values(keys))
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return Options{}, fmt.Errorf("%w: %q given twice", ErrInvalidKey, sorted[i])
		}
	}
	if o.Subtree {
		for _, a := range keys {
			for _, b := range keys {
				if a != b && within(b, a) {
					return Options{}, fmt.Errorf("%w: subtree path %q lies within %q", ErrInvalidKey, b, a)
				}
			}
		}
	}
	return o, nil
}

// sortedIndices returns the indices of keys in the keys' sorted order.
func sortedIndices(keys []string) []int {
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	return idx
}

func (p *portable) lockAll(ctx context.Context, keys []string, opts []Option, wait bool) ([]Lease, error) {
	ctx, end, err := p.set.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	o, err := resolveAll(keys, opts)
	if err != nil {
		return nil, err
	}
	if err := p.floors(o); err != nil {
		return nil, err
	}
	leases, err := p.group(ctx, keys, o, wait)
	return leases, ctxErr(ctx, keys[0], err)
}

// A group call takes several nodes and makes leases of them: a lease per
// key for LockAll, one lease over a path's nodes for a subtree lock.

// node is one key a group call takes: a plain key, or one node of the
// subtree paths that pass through it.
type node struct {
	r     *driver.Request
	g     granted
	users int // the call's leases that hold it (ancestors shared by paths)
}

// target is one lease of a group call: its key and the nodes it holds,
// root first, its own last.
type target struct {
	key   string
	nodes []*node
}

// group takes keys with options o, waiting or not, and returns their
// leases in order.
func (p *portable) group(ctx context.Context, keys []string, o Options, wait bool) ([]Lease, error) {
	targets, nodes := p.plan(keys, o, wait)
	if err := p.takeNodes(ctx, nodes); err != nil {
		return nil, err
	}
	return p.groupLeases(targets, o)
}

// plan lists the nodes of keys, each once, sorted by space and key: the
// one order in which every call takes them, so none deadlocks another.
func (p *portable) plan(keys []string, o Options, wait bool) ([]*target, []*node) {
	type name struct {
		space driver.Space
		key   string
	}
	byName := map[name]*node{}
	var nodes []*node
	get := func(space driver.Space, key string, mode driver.Mode) *node {
		n := byName[name{space, key}]
		if n == nil {
			n = &node{r: p.request(space, key, mode, o, wait)}
			byName[name{space, key}] = n
			nodes = append(nodes, n)
		}
		n.users++
		return n
	}
	targets := make([]*target, len(keys))
	for i, k := range keys {
		t := &target{key: k}
		switch {
		case !o.Subtree:
			t.nodes = []*node{get(driver.Plain, k, p.mode(o, false))}
		case !p.modes && strings.Contains(k, "/"):
			// No intention modes: the top-level node, exclusive, covers the path.
			t.nodes = []*node{get(driver.Subtree, ancestors(k)[0], driver.Exclusive)}
		default:
			for _, a := range ancestors(k) {
				t.nodes = append(t.nodes, get(driver.Subtree, a, p.mode(o, true)))
			}
			t.nodes = append(t.nodes, get(driver.Subtree, k, p.mode(o, false)))
		}
		targets[i] = t
	}
	slices.SortFunc(nodes, func(a, b *node) int {
		return cmp.Or(cmp.Compare(a.r.Space, b.r.Space), strings.Compare(a.r.Key, b.r.Key))
	})
	return targets, nodes
}

// takeNodes takes every node, all or none: in one batch where the driver
// can, else one by one in order (which a refused batch of a Lock also
// falls back to, to wait in each key's queue).
func (p *portable) takeNodes(ctx context.Context, nodes []*node) error {
	if len(nodes) > 1 && p.batcher != nil && !slices.ContainsFunc(nodes, func(n *node) bool { return p.reentries.live(n.r) }) {
		taken, err := p.batch(ctx, nodes)
		if taken || err != nil {
			return err
		}
	}
	return p.ordered(ctx, nodes)
}

// batch makes one driver.Batcher attempt at nodes. It reports whether it
// took them all; a refusal of a TryLock is ErrLocked, of a Lock no error
// (it is to wait in order).
func (p *portable) batch(ctx context.Context, nodes []*node) (bool, error) {
	rs := make([]*driver.Request, len(nodes))
	for i, n := range nodes {
		rs[i] = n.r
	}
	start := time.Now()
	gs, err := p.batcher.AcquireBatch(ctx, rs)
	switch {
	case errors.Is(err, driver.ErrSkip):
		return false, nil
	case err == nil && len(gs) != len(rs):
		err = fmt.Errorf("locker: driver answered a batch of %d with %d grants", len(rs), len(gs))
	}
	if err != nil {
		for _, r := range rs { // a grant may have landed unanswered
			p.abandon(ctx, r)
		}
		return false, err
	}
	live := true
	for i, g := range gs {
		if g.Hold == nil {
			live = false
			continue
		}
		g.Hold = p.reentries.add(rs[i], g)
		nodes[i].g, live = p.liveAnd(live, rs[i], g, start)
	}
	if live {
		return true, nil
	}
	p.giveBackNodes(ctx, nodes) // refused, or a grant arrived dead
	refused := slices.IndexFunc(gs, func(g driver.Grant) bool { return g.Hold == nil })
	switch {
	case refused >= 0 && !rs[0].Wait:
		return false, fmt.Errorf("%w: %q", ErrLocked, rs[refused].Key)
	case refused >= 0 && ctx.Err() != nil:
		return false, fmt.Errorf("%w: %q: %w", ErrLocked, rs[refused].Key, ctx.Err())
	}
	return false, ctx.Err()
}

// liveAnd is live, and'ed with ok.
func (p *portable) liveAnd(ok bool, r *driver.Request, g driver.Grant, start time.Time) (granted, bool) {
	live, alive := p.live(r, g, start)
	return live, ok && alive
}

// ordered takes nodes one by one, in order, waiting for each in turn (or
// trying each once). The nodes taken are kept alive while it waits for
// the next; should one of them be lost meanwhile, it starts again.
func (p *portable) ordered(ctx context.Context, nodes []*node) error {
	if len(nodes) == 1 { // nothing to keep alive meanwhile
		g, err := p.take(ctx, nodes[0].r)
		if err != nil && (nodes[0].r.Wait || !errors.Is(err, ErrLocked)) {
			p.abandon(ctx, nodes[0].r)
		}
		nodes[0].g = g
		return err
	}
	for {
		err := p.orderedOnce(ctx, nodes)
		if !errors.Is(err, errNodeLost) || ctx.Err() != nil {
			return err
		}
	}
}

func (p *portable) orderedOnce(ctx context.Context, nodes []*node) error {
	k := p.keep(ctx)
	defer k.stop()
	for i, n := range nodes {
		g, err := p.take(k.ctx, n.r)
		if err == nil {
			n.g = g
			k.add(n)
			continue
		}
		if n.r.Wait || !errors.Is(err, ErrLocked) {
			p.abandon(ctx, n.r)
		}
		k.stop()
		p.giveBackNodes(ctx, nodes[:i])
		if cause := context.Cause(k.ctx); errors.Is(cause, errNodeLost) && ctx.Err() == nil {
			return cause
		}
		return err
	}
	k.stop()
	return nil
}

// giveBackNodes releases the nodes that hold a grant, best-effort, last
// first, and forgets their grants.
func (p *portable) giveBackNodes(ctx context.Context, nodes []*node) {
	for i := len(nodes) - 1; i >= 0; i-- {
		if h := nodes[i].g.Hold; h != nil {
			p.giveBack(ctx, h)
			nodes[i].g = granted{}
		}
	}
}

// groupLeases makes the targets' leases of their taken nodes. Should the
// Locker close meanwhile, the holds of those not yet made are released.
func (p *portable) groupLeases(targets []*target, o Options) ([]Lease, error) {
	hold := nodeHolds(targets, p.set.spawn, p.batcher)
	leases := make([]Lease, len(targets))
	var err error
	for i, t := range targets {
		own := t.nodes[len(t.nodes)-1]
		start, deadline := own.g.start, own.g.deadline()
		for _, n := range t.nodes {
			start, deadline = minTime(start, n.g.start), minTime(deadline, n.g.deadline())
		}
		h, lost := hold(t)
		if err != nil {
			p.giveBack(context.Background(), h)
			continue
		}
		leases[i], err = newLease(p.set, leaseConfig{
			Key: t.key, Owner: o.Owner, Fence: own.g.Fence, TTL: o.TTL, KeepAlive: o.KeepAlive,
			Start: start, Validity: deadline.Sub(start), Hold: h, Lost: lost,
		})
	}
	return leases, err
}

// errNodeLost ends an ordered take whose earlier node was lost while it
// waited for a later one.
var errNodeLost = errors.New("locker: a key taken earlier was lost while waiting for the next")
