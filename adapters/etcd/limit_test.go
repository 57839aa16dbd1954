package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// Semaphores (locker.Limit) on etcd, beyond the conformance checks: the
// queue's order, waits behind any holder, mismatches of waiting calls, and
// an entry of another mode left in the queue.

// limitWait is how long a test lets a call that should not return run.
const limitWait = 300 * time.Millisecond

// lockResult is what a Lock started in the background returned.
type lockResult = testenv.LockResult

// lockInBackground starts l.Lock(key, opts...) and returns its result's
// channel once the call's entry is queued: once key has want entries.
func lockInBackground(t *testing.T, l locker.Locker, key string, want int, opts ...locker.Option) <-chan lockResult {
	t.Helper()
	h := harness(t, false)
	out := testenv.LockAsync(ctxT(t), l, key, opts...)
	deadline := time.Now().Add(10 * time.Second)
	for count(t, h, key) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%q has %d entries, want %d", key, count(t, h, key), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return out
}

// outcome describes a call's result for a message.
var outcome = testenv.Outcome

// granted waits for a background Lock to return a lease.
func granted(t *testing.T, who string, ch <-chan lockResult) locker.Lease {
	t.Helper()
	return testenv.Granted(t, who, ch, 10*time.Second)
}

// stillWaiting checks that a background Lock has not returned.
func stillWaiting(t *testing.T, who string, ch <-chan lockResult) {
	t.Helper()
	testenv.StillWaiting(t, who, ch, limitWait)
}

// A full Limit(2) with two waiters: a release by either holder (here the
// later one, so that a waiter watching only the earliest would miss it)
// admits the first waiter only; the next release admits the second; each
// grant's fence is above every earlier one; Status shows the holders and
// waiters of a Limit(2).
func TestLimitWaitersFIFO(t *testing.T) {
	b := testBackend(t)
	ctx := ctxT(t)
	key := uniq(t) + "k"
	ls := []locker.Locker{newLocker(t, b), newLocker(t, b), newLocker(t, b), newLocker(t, b)}
	first, err := ls[0].TryLock(ctx, key, locker.Limit(2))
	if err != nil {
		t.Fatal(err)
	}
	second, err := ls[1].TryLock(ctx, key, locker.Limit(2))
	if err != nil {
		t.Fatal(err)
	}
	w1 := lockInBackground(t, ls[2], key, 3, locker.Limit(2))
	w2 := lockInBackground(t, ls[3], key, 4, locker.Limit(2))
	info, err := ls[0].(locker.Admin).Status(ctx, key)
	if err != nil || info.Mode != locker.ModeLimited || info.Limit != 2 || len(info.Holders) != 2 || info.Waiters != 2 {
		t.Errorf("Status = %+v, %v; want a Limit(2), two holders and two waiters", info, err)
	}
	testenv.LimitHandOffs(t, first, second, w1, w2, 10*time.Second, limitWait)
}

// An entry of another mode behind a Limit(3)'s holder (a mismatched call's
// entry, on its way out) is waited for, as it would be by any call behind
// it: a Limit(3) call there is not granted (TryLock: ErrLocked), though a
// slot is free, nor refused as a mismatch, and is granted once that entry
// goes.
func TestLimitWaiterBehindMismatchedEntry(t *testing.T) {
	b := testBackend(t)
	ctx := ctxT(t)
	dir := uniq(t)
	key := dir + "k"
	ls := []locker.Locker{newLocker(t, b), newLocker(t, b)}
	holder, err := ls[0].TryLock(ctx, key, locker.Limit(3))
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, b.addr)
	stray := b.prefix + escape(key) + "/stray" // an Exclusive entry: no mode recorded
	if _, err := c.Put(ctx, stray, `{"owner":"stray","holds":["h"]}`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Delete(context.Background(), stray) })
	if lease, err := ls[1].TryLock(ctx, key, locker.Limit(3)); !errors.Is(err, locker.ErrLocked) {
		t.Errorf("TryLock(Limit(3)) behind a holder and a stray Exclusive entry: %s; want ErrLocked", outcome(lease, err))
		if err == nil {
			_ = lease.Unlock(ctx)
		}
	}
	w := lockInBackground(t, ls[1], key, 3, locker.Limit(3))
	stillWaiting(t, "a Limit(3) behind a stray Exclusive entry", w)
	if _, err := c.Delete(ctx, stray); err != nil {
		t.Fatal(err)
	}
	next := granted(t, "a Limit(3) once the stray entry went", w)
	if next.Fence() <= holder.Fence() {
		t.Errorf("fence %d is not above the holder's %d", next.Fence(), holder.Fence())
	}
	if n := count(t, harness(t, false), dir); n != 2 {
		t.Errorf("%d entries with two holders of a Limit(3); want 2", n)
	}
	for _, l := range []locker.Lease{holder, next} {
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
}

// Waiting calls that mismatch (Lock, LockAll) fail at once with
// ErrModeMismatch and leave no entry: other modes, or another n, on a key
// a Limit(2) holds, and a Limit(2) on a key held exclusively.
func TestLimitMismatchWhileWaiting(t *testing.T) {
	b := testBackend(t)
	ctx := ctxT(t)
	dir := uniq(t)
	h := harness(t, false)
	ls := []locker.Locker{newLocker(t, b), newLocker(t, b)}
	limitedKey, free := dir+"limited", dir+"free"
	limited, err := ls[0].TryLock(ctx, limitedKey, locker.Limit(2))
	if err != nil {
		t.Fatal(err)
	}
	exclusive, err := ls[0].TryLock(ctx, dir+"exclusive")
	if err != nil {
		t.Fatal(err)
	}
	for what, call := range map[string]func(context.Context) error{
		"Lock":           func(ctx context.Context) error { _, err := ls[1].Lock(ctx, limitedKey); return err },
		"Lock(Shared)":   func(ctx context.Context) error { _, err := ls[1].Lock(ctx, limitedKey, locker.Shared()); return err },
		"Lock(Limit(3))": func(ctx context.Context) error { _, err := ls[1].Lock(ctx, limitedKey, locker.Limit(3)); return err },
		"LockAll": func(ctx context.Context) error {
			_, err := locker.LockAll(ctx, ls[1], []string{limitedKey, free})
			return err
		},
		"TryLockAll": func(ctx context.Context) error {
			_, err := locker.TryLockAll(ctx, ls[1], []string{limitedKey, free})
			return err
		},
		"Lock(Limit(2)), held exclusively": func(ctx context.Context) error {
			_, err := ls[1].Lock(ctx, dir+"exclusive", locker.Limit(2))
			return err
		},
	} {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := call(wctx); !errors.Is(err, locker.ErrModeMismatch) {
			t.Errorf("%s beside the other mode's holder: %v; want ErrModeMismatch", what, err)
		}
		cancel()
		if n := count(t, h, dir); n != 2 {
			t.Errorf("%d entries after a refused %s; want the 2 holders'", n, what)
		}
	}
	for _, l := range []locker.Lease{limited, exclusive} {
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
}
