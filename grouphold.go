package locker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/locker-go/locker/driver"
)

// The hold of a lease over several nodes (a subtree lock: the path's
// ancestors in an intention mode, then the path itself), and the shared
// hold of a node that several leases of one LockAll pass through.

// nodeHolds returns, for each target of a group call, the hold of its
// lease and that hold's Lost: the node's own grant for a target of one
// node, else a groupHold. A node several targets share is counted out by
// each (refHold). spawn runs background releases that Close waits for.
func nodeHolds(targets []*target, spawn func(func()), batch driver.Batcher) func(t *target) (driver.Hold, context.Context) {
	refs := map[*node]*refHold{}
	for _, t := range targets {
		for _, n := range t.nodes {
			if n.users > 1 && refs[n] == nil {
				refs[n] = &refHold{h: n.g.Hold, n: n.users, op: make(slot, 1)}
			}
		}
	}
	return func(t *target) (driver.Hold, context.Context) {
		holds := make([]driver.Hold, len(t.nodes))
		losts := make([]context.Context, len(t.nodes))
		for i, n := range t.nodes {
			holds[i], losts[i] = n.g.Hold, n.g.Lost
			if r := refs[n]; r != nil {
				holds[i] = &refUser{r: r}
			}
		}
		if len(holds) == 1 && refs[t.nodes[0]] == nil {
			return holds[0], losts[0]
		}
		return newGroupHold(holds, losts, spawn, batch)
	}
}

// groupHold is one lease's hold over its nodes, root first. Refresh
// renews them all at once; Release lets the last node go first, then the
// others at once, so nobody takes an ancestor while the path is held.
// When any node is lost the lease is, and the others are let go.
type groupHold struct {
	holds    []driver.Hold
	batch    driver.Batcher // nil: the driver releases one hold a call
	spawn    func(func())
	op       slot            // one call at a time: the lease's, or the release after a loss
	lost     context.Context // done when a node is lost
	markLost context.CancelFunc
	stops    []func() bool // stop watching the nodes' Lost
	fail     sync.Once
	end      sync.Once

	mu       sync.Mutex
	released []bool
}

var _ driver.Expirer = (*groupHold)(nil)

func newGroupHold(holds []driver.Hold, losts []context.Context, spawn func(func()), batch driver.Batcher) (*groupHold, context.Context) {
	g := &groupHold{holds: holds, batch: batch, spawn: spawn, op: make(slot, 1), released: make([]bool, len(holds))}
	g.lost, g.markLost = context.WithCancel(context.Background())
	var lost context.Context // nil where no node has one: Refresh finds a loss, no watcher needed
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range losts {
		if c != nil {
			lost = g.lost
			g.stops = append(g.stops, context.AfterFunc(c, g.lose))
		}
	}
	return g, lost
}

// finish stops watching the nodes once every one is let go.
func (g *groupHold) finish() {
	g.end.Do(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, stop := range g.stops {
			stop()
		}
	})
}

// lose ends the lease lost and lets the other nodes go, in the background.
func (g *groupHold) lose() {
	g.fail.Do(func() {
		g.markLost()
		g.spawn(func() {
			ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
			defer cancel()
			_ = g.Release(ctx)
		})
	})
}

// Refresh renews every node at once: valid as long as the shortest. A node
// not held any more loses the lease.
func (g *groupHold) Refresh(ctx context.Context) (time.Duration, error) {
	if err := g.op.lock(ctx); err != nil {
		return 0, err
	}
	defer g.op.unlock()
	valid := make([]time.Duration, len(g.holds))
	errs := make([]error, len(g.holds))
	var wg sync.WaitGroup
	for i, h := range g.holds {
		wg.Go(func() { valid[i], errs[i] = h.Refresh(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if errors.Is(err, ErrNotHeld) {
			g.lose()
			return 0, ErrNotHeld
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	least := valid[0]
	for _, v := range valid[1:] {
		least = min(least, v)
	}
	return least, nil
}

// Release lets the last node go, then the others: in one driver call
// where it can (driver.Batcher), else the last node first and the others
// at once. ErrNotHeld if any of them was not held; another error leaves
// the rest to a retry.
func (g *groupHold) Release(ctx context.Context) error {
	if err := g.op.lock(ctx); err != nil {
		return err
	}
	defer g.op.unlock()
	if g.batch != nil {
		if done, err := g.releaseBatch(ctx); done {
			return err
		}
	}
	last := len(g.holds) - 1
	notHeld, err := g.release(ctx, []int{last})
	if err != nil {
		return err
	}
	rest := make([]int, last)
	for i := range rest {
		rest[i] = i
	}
	more, err := g.release(ctx, rest)
	if err != nil {
		return err
	}
	g.finish()
	if notHeld || more {
		return ErrNotHeld
	}
	return nil
}

// releaseBatch lets every node not let go yet go in one driver call, the
// last first; done is false if the driver declined.
func (g *groupHold) releaseBatch(ctx context.Context) (done bool, err error) {
	var idx []int
	var hs []driver.Hold
	g.mu.Lock()
	for i := len(g.holds) - 1; i >= 0; i-- {
		if !g.released[i] {
			idx, hs = append(idx, i), append(hs, g.holds[i])
		}
	}
	g.mu.Unlock()
	errs, err := g.batch.ReleaseBatch(ctx, hs)
	switch {
	case errors.Is(err, driver.ErrSkip):
		return false, nil
	case err != nil:
		return true, err
	case len(errs) != len(hs):
		return true, fmt.Errorf("locker: driver answered a release of %d holds with %d results", len(hs), len(errs))
	}
	notHeld := false
	g.mu.Lock()
	for j, e := range errs {
		switch {
		case e == nil:
		case errors.Is(e, ErrNotHeld):
			notHeld = true
		default:
			err = cmp.Or(err, e)
			continue
		}
		g.released[idx[j]] = true
	}
	g.mu.Unlock()
	if err != nil {
		return true, err
	}
	g.finish()
	if notHeld {
		return true, ErrNotHeld
	}
	return true, nil
}

// release lets the nodes at idx go at once, those not let go before.
func (g *groupHold) release(ctx context.Context, idx []int) (notHeld bool, err error) {
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for j, i := range idx {
		g.mu.Lock()
		done := g.released[i]
		g.mu.Unlock()
		if done {
			continue
		}
		wg.Go(func() {
			errs[j] = g.holds[i].Release(ctx)
			if errs[j] == nil || errors.Is(errs[j], ErrNotHeld) {
				g.mu.Lock()
				g.released[i] = true
				g.mu.Unlock()
			}
		})
	}
	wg.Wait()
	for j, e := range errs {
		if errors.Is(e, ErrNotHeld) {
			notHeld, errs[j] = true, nil
		}
	}
	return notHeld, errors.Join(errs...)
}

// Expire tells the nodes whose backend keeps them past the deadline
// (driver.Expirer), the last first.
func (g *groupHold) Expire(ctx context.Context) {
	if g.op.lock(ctx) != nil {
		return
	}
	defer g.op.unlock()
	for i := len(g.holds) - 1; i >= 0; i-- {
		g.mu.Lock()
		done := g.released[i]
		g.mu.Unlock()
		if e, ok := g.holds[i].(driver.Expirer); ok && !done {
			e.Expire(ctx)
		}
	}
	g.finish()
}

// refHold is a node's hold that several leases of one call share: one
// backend call at a time, and the last lease to let go releases it.
type refHold struct {
	h  driver.Hold
	op slot
	mu sync.Mutex
	n  int // leases still on it
}

// refUser is one lease's use of a refHold.
type refUser struct {
	r             *refHold
	dropped, last bool // guarded by r.mu
}

func (u *refUser) Refresh(ctx context.Context) (time.Duration, error) {
	if err := u.r.op.lock(ctx); err != nil {
		return 0, err
	}
	defer u.r.op.unlock()
	return u.r.h.Refresh(ctx)
}

func (u *refUser) Release(ctx context.Context) error {
	if !u.drop() {
		return nil
	}
	if err := u.r.op.lock(ctx); err != nil {
		return err
	}
	defer u.r.op.unlock()
	return u.r.h.Release(ctx)
}

func (u *refUser) Expire(ctx context.Context) {
	e, ok := u.r.h.(driver.Expirer)
	if !u.drop() || !ok || u.r.op.lock(ctx) != nil {
		return
	}
	defer u.r.op.unlock()
	e.Expire(ctx)
}

// drop counts the lease out, once; true if it was the last.
func (u *refUser) drop() bool {
	u.r.mu.Lock()
	defer u.r.mu.Unlock()
	if !u.dropped {
		u.dropped = true
		u.r.n--
		u.last = u.r.n == 0
	}
	return u.last
}
