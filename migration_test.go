package locker_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/adapters/mem"
	"github.com/locker-go/locker/driver"
)

// spaces returns two fresh mem lock spaces, from's counter far above to's,
// as when moving from a backend whose fences are large (etcd revisions,
// ZooKeeper czxids) to one whose counter starts low.
func spaces(t *testing.T) (from, to locker.Locker) {
	t.Helper()
	from, to = mem.New("mig-from-"+rand.Text()), mem.New("mig-to-"+rand.Text())
	if err := from.(locker.FenceRaiser).RaiseFence(t.Context(), "any", 1_000_000); err != nil {
		t.Fatal(err)
	}
	return from, to
}

// A key's fences rise through the three phases, whichever phase's process
// takes it next, and the phases exclude each other where they meet.
func TestMigrationFencesNeverGoBack(t *testing.T) {
	ctx := t.Context()
	from, to := spaces(t)
	mig := locker.Migration(from, to)
	var last uint64
	take := func(l locker.Locker, phase string) {
		t.Helper()
		lease, err := l.TryLock(ctx, "k")
		if err != nil {
			t.Fatalf("%s: %v", phase, err)
		}
		if lease.Fence() <= last {
			t.Fatalf("%s: fence %d after %d", phase, lease.Fence(), last)
		}
		last = lease.Fence()
		if err := lease.Unlock(ctx); err != nil {
			t.Fatalf("%s: unlock: %v", phase, err)
		}
	}
	// Phases 1 and 2 together, then 2 and 3 together, in turns.
	for _, phase := range []string{"1", "2", "1", "2", "2", "1", "2", "3", "2", "3", "3", "2"} {
		take(map[string]locker.Locker{"1": from, "2": mig, "3": to}[phase], "phase "+phase)
	}
}

func TestMigrationExcludesBothSides(t *testing.T) {
	ctx := t.Context()
	from, to := spaces(t)
	mig := locker.Migration(from, to)
	for _, side := range []locker.Locker{from, to} {
		held, err := side.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mig.TryLock(ctx, "k"); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("migrating TryLock while one side holds: %v, want ErrLocked", err)
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := mig.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	for _, side := range []locker.Locker{from, to} {
		if _, err := side.TryLock(ctx, "k"); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("a side's TryLock while migrating holds: %v, want ErrLocked", err)
		}
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}
	<-lease.Done()
	if !errors.Is(lease.Err(), locker.ErrNotHeld) {
		t.Fatalf("Err after Unlock: %v, want ErrNotHeld", lease.Err())
	}
	for _, side := range []locker.Locker{from, to} {
		l, err := side.TryLock(ctx, "k")
		if err != nil {
			t.Fatalf("a side after the migrating Unlock: %v", err)
		}
		_ = l.Unlock(ctx)
	}
}

// Either side lost ends the lease (Done, ErrLeaseLost), and the other
// side is let go.
func TestMigrationDoneWhenEitherSideEnds(t *testing.T) {
	ctx := t.Context()
	for i, name := range []string{"from", "to"} {
		t.Run(name, func(t *testing.T) {
			from, to := spaces(t)
			// (mem hears of a ForceUnlock at the next keep-alive: TTL/3.)
			lease, err := locker.Migration(from, to).TryLock(ctx, "k", locker.WithTTL(300*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			lost, other := []locker.Locker{from, to}[i], []locker.Locker{to, from}[i]
			if err := lost.(locker.Admin).ForceUnlock(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			select {
			case <-lease.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("Done not closed within 10s of a side's loss")
			}
			if !errors.Is(lease.Err(), locker.ErrLeaseLost) {
				t.Fatalf("Err: %v, want ErrLeaseLost", lease.Err())
			}
			// The other side is let go after Done: a Lock there is granted.
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			next, err := other.Lock(wctx, "k")
			if err != nil {
				t.Fatalf("the other side: %v, want it let go", err)
			}
			_ = next.Unlock(ctx)
			if err := lease.Unlock(ctx); !errors.Is(err, locker.ErrNotHeld) {
				t.Fatalf("Unlock of a lost lease: %v, want ErrNotHeld", err)
			}
		})
	}
}

// Done closes as a side is lost, not after the other side's release,
// which may hang on its backend for seconds: so by the lease's Deadline.
func TestMigrationDoneBeforeTheOtherSideLetsGo(t *testing.T) {
	ctx := t.Context()
	from, to := spaces(t)
	hung := &hangingUnlocks{Locker: to, unblock: make(chan struct{}), entered: make(chan struct{}, 1)}
	defer close(hung.unblock)
	lease, err := locker.Migration(from, hung).TryLock(ctx, "k", locker.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := from.(locker.Admin).ForceUnlock(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed within 10s of a side's loss")
	}
	if hung.returned.Load() {
		t.Fatal("Done closed only once the other side's release returned")
	}
	if !errors.Is(lease.Err(), locker.ErrLeaseLost) {
		t.Fatalf("Err: %v, want ErrLeaseLost", lease.Err())
	}
	select { // the other side is still let go
	case <-hung.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the other side's release not begun within 10s of Done")
	}
}

// An Unlock that finds a side's hold gone, before the lease heard of it,
// leaves the lease lost (ErrLeaseLost), as a single lease's Unlock does.
func TestMigrationUnlockFindingASideGone(t *testing.T) {
	ctx := t.Context()
	for i, name := range []string{"from", "to"} {
		t.Run(name, func(t *testing.T) {
			from, to := spaces(t)
			lease, err := locker.Migration(from, to).TryLock(ctx, "k", locker.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			lost := []locker.Locker{from, to}[i]
			if err := lost.(locker.Admin).ForceUnlock(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if err := lease.Unlock(ctx); !errors.Is(err, locker.ErrNotHeld) {
				t.Fatalf("Unlock: %v, want ErrNotHeld", err)
			}
			<-lease.Done()
			if !errors.Is(lease.Err(), locker.ErrLeaseLost) {
				t.Fatalf("Err: %v, want ErrLeaseLost", lease.Err())
			}
		})
	}
}

// hangingUnlocks is a Locker whose leases' Unlock waits for unblock (or
// its ctx) before releasing, as against a backend that hangs.
type hangingUnlocks struct {
	locker.Locker
	unblock  chan struct{}
	entered  chan struct{}
	returned atomic.Bool
}

func (h *hangingUnlocks) TryLock(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	l, err := h.Locker.TryLock(ctx, key, opts...)
	if err != nil {
		return nil, err
	}
	return &hangingLease{Lease: l, h: h}, nil
}

type hangingLease struct {
	locker.Lease
	h *hangingUnlocks
}

func (l *hangingLease) Unlock(ctx context.Context) error {
	select {
	case l.h.entered <- struct{}{}:
	default:
	}
	select {
	case <-l.h.unblock:
	case <-ctx.Done():
	}
	defer l.h.returned.Store(true)
	return l.Lease.Unlock(ctx)
}

// Lock waits for a key held on to without holding from meanwhile: a
// process still on from alone takes the key while the migrating Lock
// waits.
func TestMigrationLockWaitsWithoutHoldingFrom(t *testing.T) {
	ctx := t.Context()
	from, to := spaces(t)
	held, err := to.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan locker.Lease, 1)
	go func() {
		lease, err := locker.Migration(from, to).Lock(ctx, "k")
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	// The migrating Lock waits on to (mem queues it); from is free.
	waitUntil(t, "the migrating Lock waiting on to", func() bool {
		info, err := to.(locker.Admin).Status(ctx, "k")
		return err == nil && info.Waiters == 1
	})
	if _, err := from.(locker.Admin).Status(ctx, "k"); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("from while the migrating Lock waits on to: %v, want free", err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lease := <-got
	if lease == nil {
		t.FailNow()
	}
	if lease.Fence() <= held.Fence() {
		t.Fatalf("fence %d after to's %d", lease.Fence(), held.Fence())
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Lock whose ctx ends while it waits leaves both sides free.
func TestMigrationLockCancelled(t *testing.T) {
	from, to := spaces(t)
	held, err := to.Lock(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := locker.Migration(from, to).Lock(ctx, "k"); !errors.Is(err, locker.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock: %v, want ErrLocked and the ctx's error", err)
	}
	if err := held.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, side := range []locker.Locker{from, to} {
		if info, err := side.(locker.Admin).Status(t.Context(), "k"); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("after the cancelled Lock: %+v, %v; want the key free", info, err)
		}
	}
}

// Re-entry by WithOwner works through a Migration, with one fence.
func TestMigrationReentry(t *testing.T) {
	ctx := t.Context()
	from, to := spaces(t)
	mig := locker.Migration(from, to)
	a, err := mig.TryLock(ctx, "k", locker.WithOwner("svc-1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := mig.TryLock(ctx, "k", locker.WithOwner("svc-1"))
	if err != nil || b.Fence() != a.Fence() {
		t.Fatalf("re-entry: %v, fence %d; want fence %d", err, b.Fence(), a.Fence())
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := mig.TryLock(ctx, "k"); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("after one of two Unlocks: %v, want the key still held", err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// noFloors is a driver that cannot keep fence floors: one holder per key,
// a fence counter of its own.
type noFloors struct {
	mu    sync.Mutex
	held  map[string]bool
	fence uint64
}

func (d *noFloors) Acquire(_ context.Context, r *driver.Request) (driver.Grant, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held[r.Key] {
		return driver.Grant{Retry: r.TTL}, nil
	}
	d.held[r.Key], d.fence = true, d.fence+1
	return driver.Grant{Hold: noFloorsHold{d, r.Key, r.TTL}, Fence: d.fence}, nil
}

func (d *noFloors) Abandon(context.Context, *driver.Request) {}
func (d *noFloors) Close(context.Context) error              { return nil }

type noFloorsHold struct {
	d   *noFloors
	key string
	ttl time.Duration
}

func (h noFloorsHold) Refresh(context.Context) (time.Duration, error) { return h.ttl, nil }
func (h noFloorsHold) Release(context.Context) error {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	delete(h.d.held, h.key)
	return nil
}

// A Migration to or from a Locker that cannot keep fence floors refuses,
// taking nothing, where its fences could go back.
func TestMigrationRefusesWithoutFenceFloors(t *testing.T) {
	ctx := t.Context()
	from, to := spaces(t)
	bare := locker.New(&noFloors{held: map[string]bool{}})
	for name, mig := range map[string]locker.Locker{"to": locker.Migration(from, bare), "from": locker.Migration(bare, to)} {
		if _, err := mig.TryLock(ctx, "k"); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("%s without fence floors: %v, want ErrUnsupported", name, err)
		}
		for _, side := range []locker.Locker{from, to, bare} {
			l, err := side.TryLock(ctx, "k")
			if err != nil {
				t.Fatalf("%s: a side after the refusal: %v, want it free", name, err)
			}
			_ = l.Unlock(ctx)
		}
	}
	if _, err := bare.TryLock(ctx, "k", locker.WithFenceFloor(7)); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("WithFenceFloor on a driver without floors: %v, want ErrUnsupported", err)
	}
}

func TestMigrationURL(t *testing.T) {
	ctx := t.Context()
	u := "migrate:?from=" + url.QueryEscape("mem://mig-url-a") + "&to=" + url.QueryEscape("mem://mig-url-b")
	l, err := locker.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.New("mig-url-b").TryLock(ctx, "k"); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("to while the migrate: URL's lease holds: %v, want ErrLocked", err)
	}
	_ = lease.Unlock(ctx)
	for _, bad := range []string{
		"migrate:?from=" + url.QueryEscape("mem://a"),
		"migrate:?from=" + url.QueryEscape("mem://a") + "&to=" + url.QueryEscape("mem://b") + "&x=1",
		"migrate://host?from=a&to=b",
		"migrate:?from=" + url.QueryEscape("redis://u:secret@127.0.0.1:1/?bogus=1") + "&to=" + url.QueryEscape("mem://b"),
	} {
		_, err := locker.Open(ctx, bad)
		if err == nil || strings.Contains(err.Error(), "secret") {
			t.Fatalf("Open(%q): %v, want an error that shows no password", bad, err)
		}
	}
}

// waitUntil polls cond (a state with no event to wait on) for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

// The composite shapes go through a Migration: shared leases share both
// sides, a subtree lock covers its paths on both, LockAll takes every key
// on both.
func TestMigrationShapes(t *testing.T) {
	ctx := t.Context()
	from, to := spaces(t)
	mig := locker.Migration(from, to)
	r1, err := mig.TryLock(ctx, "doc", locker.Shared())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := mig.TryLock(ctx, "doc", locker.Shared())
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	if r2.Fence() <= r1.Fence() {
		t.Fatalf("reader fences %d then %d", r1.Fence(), r2.Fence())
	}
	for _, side := range []locker.Locker{from, to} {
		if _, err := side.TryLock(ctx, "doc"); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("a writer on a side while migrating readers hold: %v, want ErrLocked", err)
		}
	}
	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)

	tree, err := mig.TryLock(ctx, "projects/a", locker.Subtree())
	if err != nil {
		t.Fatal(err)
	}
	for _, side := range []locker.Locker{from, to} {
		if _, err := side.TryLock(ctx, "projects/a/docs", locker.Subtree()); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("a path below on a side: %v, want ErrLocked", err)
		}
	}
	_ = tree.Unlock(ctx)

	leases, err := locker.LockAll(ctx, mig, []string{"b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, side := range []locker.Locker{from, to} {
		if _, err := locker.TryLockAll(ctx, side, []string{"a"}); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("a key of a migrating LockAll on a side: %v, want ErrLocked", err)
		}
	}
	for _, l := range leases {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Close closes both sides.
func TestMigrationCloseClosesBoth(t *testing.T) {
	ctx := t.Context()
	from, to := spaces(t)
	if err := locker.Migration(from, to).Close(); err != nil {
		t.Fatal(err)
	}
	for _, side := range []locker.Locker{from, to} {
		if _, err := side.TryLock(ctx, "k"); !errors.Is(err, locker.ErrClosed) {
			t.Fatalf("a side after the Migration's Close: %v, want ErrClosed", err)
		}
	}
}
