package conformance

import (
	"errors"
	"fmt"
	"time"

	"github.com/locker-go/locker"
)

// checkFenceFloor: a Locker that keeps fence floors (locker.FenceRaiser,
// what a Migration needs of both sides) grants a key above a raised floor,
// from another client too, and above WithFenceFloor; a raise below the
// counter changes nothing, and a re-entry keeps its fence whatever floor
// it asks. The floors are far above any counter a backend starts with
// (etcd revisions, ZooKeeper czxids), as a migration's would be.
func checkFenceFloor(e *env) error {
	a, b, err := e.two()
	if err != nil {
		return err
	}
	key := e.prefix + "k"
	r, ok := a.(locker.FenceRaiser)
	if !ok {
		return skip("the Locker does not implement locker.FenceRaiser: it cannot be migrated to or from")
	}
	if err := r.RaiseFence(e.ctx, key, 0); errors.Is(err, errors.ErrUnsupported) {
		return skip("the backend keeps no fence floors: it cannot be migrated to or from")
	}
	first, err := e.tryLock(a, key)
	if err != nil {
		return err
	}
	if err := e.unlock(first); err != nil {
		return err
	}
	last, err := e.raisedFloor(r, b, key, first.Fence())
	if err != nil {
		return err
	}
	if err := e.askedFloor(a, b, key, last); err != nil {
		return err
	}
	// Twice: the first raise of a key, and a waiter that waits again soon
	// after, as under contention (etcd's waiters near the head then go by
	// what their Locker's watch of the queue told them since they queued).
	for range 2 {
		if err := e.waitedFloor(r, a, b, e.prefix+"never-raised"); err != nil {
			return err
		}
	}
	return nil
}

// waitedFloor: a waiter queued before a raise and granted after it is
// fenced above the floor (a Migration raises from's fences while
// processes that have not moved wait there), on a key raised for the
// first time (ZooKeeper waiters then learn of the offset by the raise's
// writes to the queue).
func (e *env) waitedFloor(r locker.FenceRaiser, a, b locker.Locker, key string) error {
	held, err := e.tryLock(a, key)
	if err != nil {
		return err
	}
	type result struct {
		lease locker.Lease
		err   error
	}
	got := make(chan result, 1)
	go func() {
		l, err := e.lock(b, key)
		got <- result{l, err}
	}()
	if adm, ok := a.(locker.Admin); ok {
		// Where Status counts waiters, raise once it counts this one; a
		// backend whose Status shows none (a waiter that polls) is raised
		// after a second, the waiter then likely waiting.
		_ = eventually(time.Second, "the waiter queued", func() (bool, error) {
			info, err := adm.Status(e.ctx, key)
			return err == nil && info.Waiters > 0, err
		})
	}
	floor := held.Fence() + 1<<32
	if err := r.RaiseFence(e.ctx, key, floor); err != nil {
		return fmt.Errorf("RaiseFence while a waiter waits: %w", err)
	}
	if err := e.unlock(held); err != nil {
		return err
	}
	w := <-got
	if w.err != nil {
		return w.err
	}
	if w.lease.Fence() <= floor {
		e.errorf("a waiter queued before RaiseFence(%d) was granted fence %d", floor, w.lease.Fence())
	}
	return e.unlock(w.lease)
}

// raisedFloor raises key's fences above last (a fence of it) by r, and
// checks b's grant and a re-entry of it; it returns the grant's fence.
func (e *env) raisedFloor(r locker.FenceRaiser, b locker.Locker, key string, last uint64) (uint64, error) {
	floor := last + 1<<32
	if err := r.RaiseFence(e.ctx, key, floor); err != nil {
		return 0, fmt.Errorf("RaiseFence: %w", err)
	}
	if err := r.RaiseFence(e.ctx, key, last); err != nil { // below: nothing
		return 0, fmt.Errorf("RaiseFence below the counter: %w", err)
	}
	raised, err := e.tryLock(b, key, locker.WithOwner("floor-owner"))
	if err != nil {
		return 0, err
	}
	if raised.Fence() <= floor {
		e.errorf("after RaiseFence(%d), another client's grant has fence %d", floor, raised.Fence())
	}
	again, err := e.tryLock(b, key, locker.WithOwner("floor-owner"), locker.WithFenceFloor(raised.Fence()+1<<32))
	if err != nil {
		return 0, err
	}
	if again.Fence() != raised.Fence() {
		e.errorf("a re-entry asking a floor got fence %d, want its own %d", again.Fence(), raised.Fence())
	}
	for _, l := range []locker.Lease{again, raised} {
		if err := e.unlock(l); err != nil {
			return 0, err
		}
	}
	return raised.Fence(), nil
}

// askedFloor checks a grant of key by a asking WithFenceFloor above last,
// and b's next grant above that.
func (e *env) askedFloor(a, b locker.Locker, key string, last uint64) error {
	asked := last + 1<<32
	above, err := e.tryLock(a, key, locker.WithFenceFloor(asked))
	if err != nil {
		return err
	}
	if above.Fence() <= asked {
		e.errorf("WithFenceFloor(%d) granted fence %d", asked, above.Fence())
	}
	if err := e.unlock(above); err != nil {
		return err
	}
	next, err := e.tryLock(b, key)
	if err != nil {
		return err
	}
	if next.Fence() <= above.Fence() {
		e.errorf("the grant after a floored one has fence %d, after %d", next.Fence(), above.Fence())
	}
	return e.unlock(next)
}
