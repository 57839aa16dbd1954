package locker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locker-go/locker/driver"
)

// nodeDriver holds each key as one backend node that does not count
// re-entry, as ZooKeeper does: its holds are Reenterers.
type nodeDriver struct {
	mu       sync.Mutex
	nodes    map[string]*backendNode
	acquires int
	fence    uint64
}

// backendNode is one granted backend hold, and what happened to it.
type backendNode struct {
	key, owner string
	fence      uint64
	lost       context.Context
	lose       context.CancelFunc
	gone       atomic.Bool // deleted behind the Locker's back: Reenter says so
	minTTL     time.Duration
	busy       atomic.Bool
	overlaps   atomic.Int32 // backend calls that ran beside another
	reentries  atomic.Int32
	released   atomic.Int32
	expired    atomic.Int32
}

func (d *nodeDriver) Acquire(_ context.Context, r *driver.Request) (driver.Grant, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := d.nodes[r.Key]; n != nil && n.released.Load() == 0 && !n.gone.Load() {
		return driver.Grant{}, nil // held, by whoever: re-entry is not counted here
	}
	d.acquires++
	d.fence++
	n := &backendNode{key: r.Key, owner: r.Owner, fence: d.fence, minTTL: time.Second}
	n.lost, n.lose = context.WithCancel(context.Background())
	d.nodes[r.Key] = n
	return driver.Grant{Hold: n, Fence: n.fence, Lost: n.lost}, nil
}

func (d *nodeDriver) Abandon(context.Context, *driver.Request) {}
func (d *nodeDriver) Close(context.Context) error              { return nil }

func (d *nodeDriver) Status(_ context.Context, _ driver.Space, key string) (driver.LockInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.nodes[key]
	if n == nil || n.released.Load() > 0 {
		return driver.LockInfo{}, ErrNotHeld
	}
	return driver.LockInfo{Key: key, Owner: n.owner, Fence: n.fence, Holds: 1}, nil
}
func (d *nodeDriver) List(ctx context.Context, _ string) ([]driver.LockInfo, error) {
	info, err := d.Status(ctx, driver.Plain, "k")
	return []driver.LockInfo{info}, err
}
func (d *nodeDriver) ForceUnlock(context.Context, driver.Space, string) error { return nil }

// call stands for one backend call, noting any that overlaps another.
func (n *backendNode) call() {
	if !n.busy.CompareAndSwap(false, true) {
		n.overlaps.Add(1)
		return
	}
	time.Sleep(time.Millisecond)
	n.busy.Store(false)
}

func (n *backendNode) Refresh(context.Context) (time.Duration, error) {
	n.call()
	return time.Hour, nil
}
func (n *backendNode) Release(context.Context) error { n.call(); n.released.Add(1); return nil }
func (n *backendNode) Expire(context.Context)        { n.call(); n.expired.Add(1) }

func (n *backendNode) Reenter(_ context.Context, r *driver.Request) (driver.Grant, error) {
	n.call()
	switch {
	case r.TTL < n.minTTL:
		return driver.Grant{}, ErrInvalidTTL
	case n.gone.Load():
		return driver.Grant{}, nil
	}
	n.reentries.Add(1)
	return driver.Grant{Hold: n}, nil
}

type adminLockerT interface {
	Locker
	Admin
}

func holdsOf(t *testing.T, lk adminLockerT) int {
	t.Helper()
	info, err := lk.Status(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	list, err := lk.List(context.Background(), "")
	if err != nil || len(list) != 1 || list[0].Holds != info.Holds {
		t.Errorf("List = %+v, %v; want the Status %+v", list, err, info)
	}
	return info.Holds
}

// A Reenterer's re-entry is counted by the Locker: one Acquire, the same
// fence and Lost, calls on the shared hold one at a time, and only the
// last Unlock releases it.
func TestReentryCountedByTheLocker(t *testing.T) {
	d := &nodeDriver{nodes: map[string]*backendNode{}}
	lk := New(d).(adminLockerT)
	defer lk.Close()
	ctx, me := context.Background(), WithOwner("me")
	a, err := lk.TryLock(ctx, "k", me)
	if err != nil {
		t.Fatal(err)
	}
	b, err := lk.TryLock(ctx, "k", me)
	if err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	n := d.nodes["k"]
	if d.acquires != 1 || n.reentries.Load() != 1 || b.Fence() != a.Fence() {
		t.Fatalf("acquires %d, reentries %d, fences %d %d; want 1, 1 and one fence", d.acquires, n.reentries.Load(), a.Fence(), b.Fence())
	}
	if h := holdsOf(t, lk); h != 2 {
		t.Errorf("Holds = %d, want 2", h)
	}
	if _, err := lk.TryLock(ctx, "k", me, WithTTL(time.Millisecond)); !errors.Is(err, ErrInvalidTTL) {
		t.Errorf("re-entry the driver refuses = %v, want its ErrInvalidTTL", err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { _ = a.Refresh(ctx) })
		wg.Go(func() { _ = b.Refresh(ctx) })
	}
	wg.Wait()
	if o := n.overlaps.Load(); o > 0 {
		t.Errorf("%d backend calls on the shared hold overlapped", o)
	}
	if err := a.Unlock(ctx); err != nil || n.released.Load() != 0 || b.Err() != nil {
		t.Fatalf("first Unlock = %v: %d releases, other lease %v; want the hold kept", err, n.released.Load(), b.Err())
	}
	if h := holdsOf(t, lk); h != 1 {
		t.Errorf("Holds after one Unlock = %d, want 1", h)
	}
	if err := b.Unlock(ctx); err != nil || n.released.Load() != 1 {
		t.Fatalf("last Unlock = %v with %d releases, want one", err, n.released.Load())
	}
	if _, err := lk.TryLock(ctx, "k", me); err != nil || d.acquires != 2 {
		t.Errorf("TryLock after the last Unlock = %v after %d acquires, want a new hold", err, d.acquires)
	}
}

// The leases of a shared hold are lost together; a hold that Reenter says
// is gone, or that was lost, is acquired anew.
func TestReentryOfALostHold(t *testing.T) {
	d := &nodeDriver{nodes: map[string]*backendNode{}}
	lk := New(d)
	defer lk.Close()
	ctx, me := context.Background(), WithOwner("me")
	a, _ := lk.TryLock(ctx, "k", me)
	b, err := lk.TryLock(ctx, "k", me)
	if err != nil {
		t.Fatal(err)
	}
	d.nodes["k"].lose()
	for _, l := range []Lease{a, b} {
		<-l.Done()
		if !errors.Is(l.Err(), ErrLeaseLost) {
			t.Errorf("Err = %v, want ErrLeaseLost", l.Err())
		}
	}
	d.nodes["k"].gone.Store(true)
	c, err := lk.TryLock(ctx, "k", me)
	if err != nil || c.Fence() == a.Fence() || d.acquires != 2 {
		t.Fatalf("TryLock after loss = %v, fence %d, %d acquires; want a new hold", err, c.Fence(), d.acquires)
	}
	d.nodes["k"].gone.Store(true) // deleted, not yet seen lost
	e, err := lk.TryLock(ctx, "k", me)
	if err != nil || e.Fence() == c.Fence() || d.acquires != 3 {
		t.Fatalf("TryLock on a gone hold = %v, fence %d, %d acquires; want a new hold", err, e.Fence(), d.acquires)
	}
}

// A shared lease that expires counts itself out; the backend hold is
// expired only by the last.
func TestReentryExpiresOneLease(t *testing.T) {
	d := &nodeDriver{nodes: map[string]*backendNode{}}
	lk := New(d)
	defer lk.Close()
	ctx, me := context.Background(), WithOwner("me")
	long, _ := lk.TryLock(ctx, "k", me, WithTTL(time.Hour))
	short, err := lk.TryLock(ctx, "k", me, WithTTL(time.Second), WithKeepAlive(false))
	if err != nil {
		t.Fatal(err)
	}
	<-short.Done()
	n := d.nodes["k"]
	time.Sleep(50 * time.Millisecond) // Expire runs in the background
	if n.expired.Load() != 0 || n.released.Load() != 0 || long.Err() != nil {
		t.Fatalf("after one lease expired: %d expires, %d releases, other lease %v; want the hold kept",
			n.expired.Load(), n.released.Load(), long.Err())
	}
	if err := long.Unlock(ctx); err != nil || n.released.Load() != 1 {
		t.Errorf("last Unlock = %v with %d releases, want one", err, n.released.Load())
	}
}

// A driver whose holds are no Reenterers is asked for every re-entry.
func TestReentryOfOtherDriversReachesThem(t *testing.T) {
	d := &holdDriver{hold: &fakeOps{}}
	lk := New(d)
	defer lk.Close()
	for range 2 {
		if _, err := lk.TryLock(context.Background(), "k", WithOwner("me")); err != nil {
			t.Fatal(err)
		}
	}
	if n := d.attempts.Load(); n != 2 {
		t.Errorf("%d Acquires for two re-entrant TryLocks, want 2", n)
	}
}
