package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/adapters/zookeeper"
	"github.com/locker-go/locker/internal/testenv"
)

// Semaphores (locker.Limit) on ZooKeeper, beyond the conformance checks:
// the node names, the queue's order with a release by any holder,
// mismatches leaving no node, and a node of another mode in the queue.

// limitWait is how long a test lets a call that should not return run.
const limitWait = 300 * time.Millisecond

// lockResult is what a Lock started in the background returned.
type lockResult = testenv.LockResult

// lockInBackground starts l.Lock(key, opts...) and returns its result's
// channel once the call's node is queued: once key has want nodes.
func lockInBackground(t *testing.T, u *url.URL, l locker.Locker, key string, want int, opts ...locker.Option) <-chan lockResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	out := testenv.LockAsync(ctx, l, key, opts...)
	raw := rawConn(t, u)
	eventually(t, func() bool { return count(t, raw, root(u), key) == want })
	return out
}

// outcome describes a call's result for a message.
var outcome = testenv.Outcome

// granted waits for a background Lock to return a lease.
func granted(t *testing.T, who string, ch <-chan lockResult) locker.Lease {
	t.Helper()
	return testenv.Granted(t, who, ch, 5*time.Second)
}

// stillWaiting checks that a background Lock has not returned.
func stillWaiting(t *testing.T, who string, ch <-chan lockResult) {
	t.Helper()
	testenv.StillWaiting(t, who, ch, limitWait)
}

// lockNames are the names of key's lock nodes.
func lockNames(t *testing.T, u *url.URL, key string) []string {
	t.Helper()
	children, _, err := rawConn(t, u).Children(root(u) + "/" + zookeeper.Escape(key))
	if err != nil {
		t.Fatal(err)
	}
	return children
}

// A Limited node carries its n beside its mode ("-L3-lock-"), where one
// listing shows it to every client; exclusive and shared nodes are named
// as before modes kept limits.
func TestLimitNodeNames(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	l := open(t, u)
	ctx := context.Background()
	dir := uniq(t)
	for _, c := range []struct {
		key, tag string
		opts     []locker.Option
	}{
		{dir + "limit", "-L3-lock-", []locker.Option{locker.Limit(3)}},
		{dir + "one", "-lock-", []locker.Option{locker.Limit(1)}}, // exclusive
		{dir + "x", "-lock-", nil},
		{dir + "s", "-S-lock-", []locker.Option{locker.Shared()}},
	} {
		lease, err := l.TryLock(ctx, c.key, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		names := lockNames(t, u, c.key)
		if len(names) != 1 || !strings.HasPrefix(names[0], "_c_") {
			t.Fatalf("%q's nodes: %q; want one lock node", c.key, names)
		}
		name := names[0]
		end := len(name) - 10 // the sequence's digits
		if end-len(c.tag) <= 3 || name[end-len(c.tag):end] != c.tag || strings.Contains(name[3:end-len(c.tag)], "-") {
			t.Errorf("%q's node is %q; want _c_<guid>%s<seq>", c.key, name, c.tag)
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A full Limit(2) with two waiters: a release by the later holder (one
// that a waiter watching only the first holder would miss) admits the
// first waiter only; the next release admits the second; each grant's
// fence is above every earlier one; Status and List show the holders and
// waiters of a Limit(2).
func TestLimitWaitersFIFO(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	ctx := context.Background()
	key := uniq(t) + "k"
	ls := []locker.Locker{open(t, u), open(t, u), open(t, u), open(t, u)}
	first, err := ls[0].TryLock(ctx, key, locker.Limit(2))
	if err != nil {
		t.Fatal(err)
	}
	second, err := ls[1].TryLock(ctx, key, locker.Limit(2))
	if err != nil {
		t.Fatal(err)
	}
	w1 := lockInBackground(t, u, ls[2], key, 3, locker.Limit(2))
	w2 := lockInBackground(t, u, ls[3], key, 4, locker.Limit(2))
	checkLimitStatus(t, ls[0].(locker.Admin), key, 2, first.Fence())
	testenv.LimitHandOffs(t, first, second, w1, w2, 5*time.Second, limitWait)
}

// checkLimitStatus checks that Status and List show key as a Limit(n)
// held by two holders, the first of fence, with two waiters.
func checkLimitStatus(t *testing.T, a locker.Admin, key string, n int, fence uint64) {
	t.Helper()
	info, err := a.Status(context.Background(), key)
	if err != nil || info.Mode != locker.ModeLimited || info.Limit != n || len(info.Holders) != 2 || info.Waiters != 2 || info.Fence != fence {
		t.Errorf("Status = %+v, %v; want a Limit(%d), two holders (the first of fence %d) and two waiters", info, err, n, fence)
	}
	list, err := a.List(context.Background(), key)
	if err != nil || len(list) != 1 || list[0].Mode != locker.ModeLimited || list[0].Limit != n || len(list[0].Holders) != 2 {
		t.Errorf("List = %+v, %v; want one Limit(%d) of two holders", list, err, n)
	}
}

// A mismatch, by any owner, TryLock or Lock, waiter or not, fails with
// ErrModeMismatch and leaves no node: another n or mode on a Limited
// key (also behind a waiter), and a Limit on an exclusive or shared one.
func TestLimitMismatchLeavesNoNode(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	ctx := context.Background()
	dir := uniq(t)
	a, b := open(t, u), open(t, u)
	raw := rawConn(t, u)
	for i, c := range []struct {
		what string
		held []locker.Option
		asks map[string][]locker.Option
	}{
		{"a Limit(2)", []locker.Option{locker.Limit(2)}, map[string][]locker.Option{
			"Limit(3)": {locker.Limit(3)}, "an exclusive lock": nil, "a shared lock": {locker.Shared()},
		}},
		{"an exclusive lock", nil, map[string][]locker.Option{"Limit(2)": {locker.Limit(2)}}},
		{"a shared lock", []locker.Option{locker.Shared()}, map[string][]locker.Option{"Limit(2)": {locker.Limit(2)}}},
	} {
		key := dir + fmt.Sprint(i)
		held, err := a.TryLock(ctx, key, c.held...)
		if err != nil {
			t.Fatal(err)
		}
		for what, opts := range c.asks {
			for _, wait := range []bool{false, true} {
				call := b.TryLock
				if wait {
					call = b.Lock
				}
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				lease, err := call(cctx, key, opts...)
				cancel()
				if !errors.Is(err, locker.ErrModeMismatch) {
					t.Errorf("%s (wait %v) on a key held by %s: %s; want ErrModeMismatch", what, wait, c.what, outcome(lease, err))
				}
				if n := count(t, raw, root(u), key); n != 1 {
					t.Errorf("%s (wait %v) on a key held by %s: %d nodes left; want the holder's alone", what, wait, c.what, n)
				}
			}
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A mismatch is found behind a waiter too: a Limit(3) behind a full
// Limit(2) and its waiter fails at once, and the waiter still gets in.
func TestLimitMismatchBehindWaiter(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	ctx := context.Background()
	key := uniq(t) + "k"
	ls := []locker.Locker{open(t, u), open(t, u), open(t, u), open(t, u)}
	var held []locker.Lease
	for _, l := range ls[:2] {
		lease, err := l.TryLock(ctx, key, locker.Limit(2))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lease)
	}
	w := lockInBackground(t, u, ls[2], key, 3, locker.Limit(2))
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if lease, err := ls[3].Lock(tctx, key, locker.Limit(3)); !errors.Is(err, locker.ErrModeMismatch) {
		t.Errorf("Limit(3) behind a Limit(2)'s waiter: %s; want ErrModeMismatch", outcome(lease, err))
	}
	if n := count(t, rawConn(t, u), root(u), key); n != 3 {
		t.Errorf("%d nodes after the mismatch; want 3", n)
	}
	if err := held[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	third := granted(t, "the waiter, after a release", w)
	for _, l := range []locker.Lease{held[1], third} {
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
}

// A node of another mode behind a Limit(3)'s holder (a mismatched call's,
// on its way out, or an earlier version's exclusive one) is waited for,
// as by any call behind it: a Limit(3) call there is not granted (TryLock:
// ErrLocked) though a slot is free, nor refused as a mismatch, and is
// granted once that node goes.
func TestLimitWaiterBehindNodeOfAnotherMode(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	ctx := context.Background()
	key := uniq(t) + "k"
	a, b := open(t, u), open(t, u)
	holder, err := a.TryLock(ctx, key, locker.Limit(3))
	if err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, u)
	stray, err := raw.Create(root(u)+"/"+zookeeper.Escape(key)+"/_c_stray-lock-", []byte("stray"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	if lease, err := b.TryLock(ctx, key, locker.Limit(3)); !errors.Is(err, locker.ErrLocked) {
		t.Errorf("Limit(3) behind a holder and an exclusive node: %s; want ErrLocked", outcome(lease, err))
	}
	w := lockInBackground(t, u, b, key, 3, locker.Limit(3))
	stillWaiting(t, "a Limit(3) behind an exclusive node", w)
	if err := raw.Delete(stray, -1); err != nil {
		t.Fatal(err)
	}
	second := granted(t, "a Limit(3), once the exclusive node went", w)
	if second.Fence() <= holder.Fence() {
		t.Errorf("fence %d is not above the holder's %d", second.Fence(), holder.Fence())
	}
	for _, l := range []locker.Lease{holder, second} {
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
}
