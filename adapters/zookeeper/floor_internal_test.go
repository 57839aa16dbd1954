package zookeeper

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// A raise's touch of a waiter's node, pending on its watch when the wait
// ends, is taken before the grant reads (or skips) the fence offset: the
// wait's select may have taken the deletion that made it first instead,
// and the grant then took a fence below the floor (seen once in
// TestConformanceEnsemble/FenceFloor). A deletion pending means the node
// is gone; nothing pending changes nothing.
func TestTakeOwnEvents(t *testing.T) {
	t.Parallel()
	z := openZ(t, testenv.URL(t, "LOCKER_TEST_ZK"))
	ctx := context.Background()
	s := z.primary
	if err := z.ensureRoot(ctx, s); err != nil {
		t.Fatal(err)
	}
	path, err := s.conn.Create(z.cfg.root+"/own-"+rand.Text(), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	pending := func(ev zk.Event) *node {
		ch := make(chan zk.Event, 1)
		ch <- ev
		return &node{path: path, watch: ch}
	}

	n := pending(zk.Event{Type: zk.EventNodeDataChanged, Path: path})
	if err := n.takeOwnEvents(ctx, s); err != nil || !n.touched {
		t.Errorf("a touch pending: err %v, touched %v; want nil, true", err, n.touched)
	}
	if len(n.watch) != 0 {
		t.Error("the node's watch was not set again after its touch was taken")
	}

	n = pending(zk.Event{Type: zk.EventNodeDeleted, Path: path})
	if err := n.takeOwnEvents(ctx, s); !errors.Is(err, errGone) {
		t.Errorf("a deletion pending: err %v, want errGone", err)
	}

	n = &node{path: path, watch: make(chan zk.Event, 1)}
	if err := n.takeOwnEvents(ctx, s); err != nil || n.touched {
		t.Errorf("nothing pending: err %v, touched %v; want nil, false", err, n.touched)
	}
}

// The race itself: a key's first raise touches the waiter's node, then
// the holder releases, and both events are pending when the waiter's wait
// looks (a loaded machine: the waiter was not yet waiting when they came),
// so that its select may take either first. Whichever it takes, the grant
// must read the new offset: its fence is above the floor. (Without
// takeOwnEvents about half of the rounds took the deletion first and
// fenced below the floor, as TestConformanceEnsemble/FenceFloor once did.)
func TestGrantAfterTouchAndReleaseTogether(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	holder, waiter := openZ(t, u), openZ(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const prefix, floor = "touch-race-", 1 << 40
	hook := func(n *node, pred <-chan zk.Event) {
		if !strings.Contains(n.parent, prefix) {
			return // another test's
		}
		// Until both events are pending: the touch on our node's watch,
		// or seen already (n.touched: it came before the watch was set,
		// which then never fires for it), and the release on pred's.
		for (len(n.watch) == 0 && !n.touched) || len(pred) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Millisecond): // polling a condition: a channel's length has no watch
			}
		}
	}
	testHookBeforeWait.Store(&hook)
	defer testHookBeforeWait.Store(nil)
	for round := range 16 {
		key := prefix + rand.Text()
		if _, err := holder.Lock(ctx, key, locker.WithKeepAlive(false)); err != nil {
			t.Fatal(err)
		}
		got := make(chan locker.Lease, 1)
		go func() {
			lease, err := waiter.Lock(ctx, key)
			if err != nil {
				t.Error(err)
			}
			got <- lease
		}()
		s, parent := holder.primary, holder.parent(driver.Plain, key)
		var nodes []string
		for len(nodes) < 2 { // until the waiter's node is queued
			children, _, err := s.conn.Children(parent)
			if err != nil {
				t.Fatal(err)
			}
			nodes = lockNodes(children)
			select {
			case <-ctx.Done():
				t.Fatal("the waiter never queued")
			case <-time.After(2 * time.Millisecond): // polling a condition: a queue offers nothing to wait on
			}
		}
		// The raise (its offset, then its touch of the queue), and after it
		// the holder's release.
		if _, err := s.conn.Create(holder.floorPath(driver.Plain, key), []byte(strconv.Itoa(floor)), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.conn.Set(parent+"/"+nodes[1], nil, -1); err != nil {
			t.Fatal(err)
		}
		if err := s.conn.Delete(parent+"/"+nodes[0], -1); err != nil {
			t.Fatal(err)
		}
		lease := <-got
		if lease == nil {
			return
		}
		if lease.Fence() <= floor {
			t.Fatalf("round %d: the waiter was granted fence %d, below the floor %d raised before the release", round, lease.Fence(), floor)
		}
		_ = lease.Unlock(ctx)
	}
}

// A key's first raise and its holder's release both landing between a
// waiter's create and its listing: the listing finds the waiter's node
// first, with no wait, and shows the raise's touch on it; the grant reads
// the offset all the same, so its fence is above the floor. (It read it
// only after a wait: TestGrantAfterTouchAndReleaseTogether once met this
// order in a full run and was granted fence 354108 under the floor 2^40.)
func TestGrantFirstAtListingAfterTouch(t *testing.T) {
	const floor = 1 << 40
	grantAfterWrites(t, "touch-first-", 0, floor, &testHookAfterCreate, func(h *zLocker, key, path string) error {
		// a first raise: its offset, then its touch of the queue
		if _, err := h.primary.conn.Create(h.floorPath(driver.Plain, key), []byte(strconv.Itoa(floor)), 0, zk.WorldACL(zk.PermAll)); err != nil {
			return err
		}
		_, err := h.primary.conn.Set(path, nil, -1)
		return err
	})
}

// On a key raised before, a raise and the holder's release landing after a
// waiter read the offset beside its listing, and before the listing, which
// then finds the waiter's node first: its grant reads the offset again, so
// its fence is above the later floor (the offset read beside the listing
// was the earlier one's).
func TestGrantFirstAtListingAfterRaise(t *testing.T) {
	const floor = 1 << 41
	grantAfterWrites(t, "raise-first-", 1<<40, floor, &testHookBeforeListing, func(h *zLocker, key, _ string) error {
		return h.RaiseFence(context.Background(), driver.Plain, key, floor)
	})
}

// grantAfterWrites has a holder take a fresh key (raised to before first,
// if not 0) and a waiter Lock it, with raise (the holder's writes, given
// the waiter's node) and then the holder's release landing where hook runs
// on the waiter's way; the waiter's fence must be above floor.
func grantAfterWrites(t *testing.T, prefix string, before, floor uint64, hook *atomic.Pointer[func(path string)],
	raise func(h *zLocker, key, path string) error) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	holder, waiter := openZ(t, u), openZ(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := prefix + rand.Text()
	if err := holder.RaiseFence(ctx, driver.Plain, key, before); err != nil {
		t.Fatal(err)
	}
	held, err := holder.Lock(ctx, key, locker.WithKeepAlive(false))
	if err != nil {
		t.Fatal(err)
	}
	if held.Fence() <= before {
		t.Fatalf("the holder's fence %d, below the floor %d", held.Fence(), before)
	}
	s, parent := holder.primary, holder.parent(driver.Plain, key)
	landed := make(chan error, 1)
	land := func(path string) {
		if !strings.HasPrefix(path, parent+"/") {
			return // another test's
		}
		landed <- func() error {
			children, _, err := s.conn.Children(parent)
			if err != nil {
				return err
			}
			nodes := lockNodes(children)
			if len(nodes) != 2 || parent+"/"+nodes[1] != path {
				return errors.New("the queue is not the holder's node and the waiter's")
			}
			if err := raise(holder, key, path); err != nil {
				return err
			}
			return s.conn.Delete(parent+"/"+nodes[0], -1)
		}()
	}
	hook.Store(&land)
	defer hook.Store(nil)
	lease, err := waiter.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Unlock(ctx) }()
	select {
	case err := <-landed:
		if err != nil {
			t.Fatalf("the writes on the waiter's way: %v", err)
		}
	default:
		t.Fatal("the hook never ran on the waiter's way")
	}
	if lease.Fence() <= floor {
		t.Fatalf("the waiter was granted fence %d, below the floor %d raised before the release", lease.Fence(), floor)
	}
}
