package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locker-go/locker"
)

// Run runs every conformance check against the backend h drives.
func Run(t *testing.T, h Harness) {
	if h.NewLocker == nil || h.Crash == nil || h.Count == nil {
		t.Fatal("conformance: Harness needs NewLocker, Crash and Count")
	}
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"MutualExclusion", testMutualExclusion},
		{"TryLockHeld", testTryLockHeld},
		{"IndependentKeys", testIndependentKeys},
		{"OpaqueKeys", testOpaqueKeys},
		{"ExpiryWithoutKeepAlive", testExpiryWithoutKeepAlive},
		{"ExpiryAfterCrash", testExpiryAfterCrash},
		{"OwnerOnlyRelease", testOwnerOnlyRelease},
		{"KeepAlive", testKeepAlive},
		{"RefreshMovesDeadline", testRefreshMovesDeadline},
		{"Reentry", testReentry},
		{"Cancellation", testCancellation},
		{"Handoff", testHandoff},
		{"FIFO", testFIFO},
		{"InvalidInput", testInvalidInput},
		{"DoubleUnlock", testDoubleUnlock},
		{"Closed", testClosed},
		{"CloseWakesWaiters", testCloseWakesWaiters},
		{"NoLeak", testNoLeak},
		{"Do", testDo},
		{"DoLeaseLost", testDoLeaseLost},
		{"Admin", testAdmin},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

// 8 clients × 25 rounds around an unprotected read-sleep-write counter: any
// overlap of two holders loses an update.
func testMutualExclusion(t *testing.T, h Harness) {
	const clients, rounds = 8, 25
	key := keyFor(t) + "k"
	var (
		counter, inside atomic.Int64
		mu              sync.Mutex
		fences          []uint64
		wg              sync.WaitGroup
	)
	errs := make(chan error, clients)
	for range clients {
		l := h.client(t)
		wg.Go(func() {
			for range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				lease, err := l.Lock(ctx, key)
				cancel()
				if err != nil {
					errs <- err
					return
				}
				if n := inside.Add(1); n != 1 {
					errs <- fmt.Errorf("%d holders at once", n)
				}
				mu.Lock()
				fences = append(fences, lease.Fence())
				mu.Unlock()
				v := counter.Load()
				time.Sleep(100 * time.Microsecond) // widen the window a second holder would hit
				counter.Store(v + 1)
				inside.Add(-1)
				if err := lease.Unlock(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := counter.Load(); got != clients*rounds {
		t.Errorf("counter = %d, want %d: an update was lost to overlapping holders", got, clients*rounds)
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fence %d of acquisition %d is not above %d of the one before", fences[i], i, fences[i-1])
		}
	}
}

func testTryLockHeld(t *testing.T, h Harness) {
	key := keyFor(t) + "k"
	a, b := h.client(t), h.client(t)
	held := tryLock(t, a, key)
	for name, l := range map[string]locker.Locker{"other client": b, "same client, other owner": a} {
		if lease, err := l.TryLock(testCtx(t), key); !errors.Is(err, locker.ErrLocked) {
			t.Errorf("%s: TryLock on a held key = %v, %v; want ErrLocked", name, lease, err)
		}
	}
	if err := held.Err(); err != nil {
		t.Errorf("holder's Err = %v after a refused TryLock", err)
	}
	unlock(t, held)
	unlock(t, tryLock(t, b, key))
}

func testIndependentKeys(t *testing.T, h Harness) {
	p := keyFor(t)
	a, b := h.client(t), h.client(t)
	held := lock(t, a, p+"one")
	other := tryLock(t, b, p+"two")
	unlock(t, other)
	unlock(t, held)
}

// Pattern characters of Redis, SQL LIKE, globs and paths mean nothing in a key.
func testOpaqueKeys(t *testing.T, h Harness) {
	p := keyFor(t)
	names := []string{"a", "a.b", "a-b", "a%b", "a_b", "a*", "a?", "[a]", "a/b", "a/b/c", "a\\b", "ab", "ключ", "a b", "{a}"}
	a, b := h.client(t), h.client(t)
	leases := map[string]locker.Lease{}
	for _, n := range names {
		leases[n] = tryLock(t, a, p+n) // each is free although the others are held
	}
	for _, n := range names {
		if _, err := b.TryLock(testCtx(t), p+n); !errors.Is(err, locker.ErrLocked) {
			t.Errorf("TryLock(%q) held by another client = %v, want ErrLocked", n, err)
		}
	}
	for _, n := range []string{"a*", "a/b", "a%b"} {
		unlock(t, leases[n])
		delete(leases, n)
		unlock(t, tryLock(t, b, p+n))
	}
	for n, lease := range leases { // releasing those freed nothing else
		if _, err := b.TryLock(testCtx(t), p+n); !errors.Is(err, locker.ErrLocked) {
			t.Errorf("TryLock(%q) = %v after other keys were released, want ErrLocked", n, err)
		}
		if lease.Key() != p+n {
			t.Errorf("Key() = %q, want %q", lease.Key(), p+n)
		}
	}
}

func testExpiryWithoutKeepAlive(t *testing.T, h Harness) {
	key := keyFor(t) + "k"
	a, b := h.client(t), h.client(t)
	ttl := h.ttl()
	start := time.Now()
	old := tryLock(t, a, key, locker.WithTTL(ttl), locker.WithKeepAlive(false))
	if d := old.Deadline(); d.After(time.Now().Add(ttl)) || d.Before(start) {
		t.Errorf("Deadline %v after the call began is not within its TTL %v", d.Sub(start), ttl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ttl+slack)
	defer cancel()
	next, err := b.Lock(ctx, key)
	if err != nil {
		t.Fatalf("key not free within TTL %v + %v: %v", ttl, slack, err)
	}
	waitDone(t, old, slack)
	if err := old.Err(); !errors.Is(err, locker.ErrLeaseLost) {
		t.Errorf("expired lease Err = %v, want ErrLeaseLost", err)
	}
	if next.Fence() <= old.Fence() {
		t.Errorf("fence %d after expiry is not above the expired %d", next.Fence(), old.Fence())
	}
	unlock(t, next)
}

func testExpiryAfterCrash(t *testing.T, h Harness) {
	key := keyFor(t) + "k"
	a, b := h.NewLocker(t), h.client(t)
	ttl := h.ttl()
	old := tryLock(t, a, key, locker.WithTTL(ttl))
	h.Crash(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), ttl+slack)
	defer cancel()
	next, err := b.Lock(ctx, key)
	if err != nil {
		t.Fatalf("key of a crashed holder not free within TTL %v + %v: %v", ttl, slack, err)
	}
	if next.Fence() <= old.Fence() {
		t.Errorf("fence %d after crash is not above the crashed holder's %d", next.Fence(), old.Fence())
	}
	unlock(t, next)
}

func testOwnerOnlyRelease(t *testing.T, h Harness) {
	key := keyFor(t) + "k"
	a, b, c := h.client(t), h.client(t), h.client(t)
	old := tryLock(t, a, key, locker.WithTTL(h.ttl()), locker.WithKeepAlive(false))
	waitDone(t, old, h.ttl()+slack)
	next := lock(t, b, key)
	if err := old.Unlock(testCtx(t)); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("Unlock of an expired, taken-over lease = %v, want ErrNotHeld", err)
	}
	if err := old.Refresh(testCtx(t)); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("Refresh of an expired, taken-over lease = %v, want ErrNotHeld", err)
	}
	if _, err := c.TryLock(testCtx(t), key); !errors.Is(err, locker.ErrLocked) {
		t.Errorf("the new owner lost the key to the old one's Unlock: TryLock = %v", err)
	}
	if err := next.Refresh(testCtx(t)); err != nil {
		t.Errorf("new owner's Refresh = %v", err)
	}
	if err := next.Err(); err != nil {
		t.Errorf("new owner's Err = %v", err)
	}
	unlock(t, next)
}

func testKeepAlive(t *testing.T, h Harness) {
	key := keyFor(t) + "k"
	a, b := h.client(t), h.client(t)
	ttl := h.ttl()
	held := lock(t, a, key, locker.WithTTL(ttl))
	end := time.Now().Add(3 * ttl)
	tick := time.NewTicker(ttl / 4)
	defer tick.Stop()
	for time.Now().Before(end) {
		<-tick.C
		if lease, err := b.TryLock(testCtx(t), key); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("kept-alive key taken at %v of 3×TTL: %v, %v", time.Until(end), lease, err)
		}
	}
	select {
	case <-held.Done():
		t.Fatalf("kept-alive lease ended: %v", held.Err())
	default:
	}
	if !held.Deadline().After(time.Now()) {
		t.Errorf("kept-alive lease's Deadline %v is in the past", held.Deadline())
	}
	unlock(t, held)
}

func testRefreshMovesDeadline(t *testing.T, h Harness) {
	key := keyFor(t) + "k"
	a := h.client(t)
	held := tryLock(t, a, key, locker.WithKeepAlive(false))
	before := held.Deadline()
	if err := held.Refresh(testCtx(t)); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if after := held.Deadline(); !after.After(before) {
		t.Errorf("Deadline after Refresh %v is not after %v", after, before)
	}
	unlock(t, held)
}

func testReentry(t *testing.T, h Harness) {
	key := keyFor(t) + "k"
	a, b := h.client(t), h.client(t)
	me := locker.WithOwner("owner-" + runID)
	first := tryLock(t, a, key, me)
	second := lock(t, a, key, me)
	if first.Fence() != second.Fence() {
		t.Errorf("re-entry changed the fence: %d then %d", first.Fence(), second.Fence())
	}
	if first.Owner() != "owner-"+runID || second.Owner() != first.Owner() {
		t.Errorf("Owner() = %q, %q; want the WithOwner id", first.Owner(), second.Owner())
	}
	if _, err := b.TryLock(testCtx(t), key, locker.WithOwner("someone-else")); !errors.Is(err, locker.ErrLocked) {
		t.Errorf("another owner's TryLock = %v, want ErrLocked", err)
	}
	unlock(t, first)
	if _, err := b.TryLock(testCtx(t), key); !errors.Is(err, locker.ErrLocked) {
		t.Errorf("TryLock after one of two Unlocks = %v, want ErrLocked", err)
	}
	unlock(t, second)
	unlock(t, tryLock(t, b, key))
}

func testCancellation(t *testing.T, h Harness) {
	key := keyFor(t) + "k"
	a, b, c := h.client(t), h.client(t), h.client(t)
	held := lock(t, a, key)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if lease, err := b.Lock(ctx, key); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past its deadline = %v, %v; want an error matching context.DeadlineExceeded", lease, err)
	}
	if d := time.Since(start); d > 200*time.Millisecond+slack {
		t.Errorf("Lock returned %v after its ctx deadline", d-200*time.Millisecond)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if lease, err := b.Lock(ctx, key); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Lock = %v, %v; want an error matching context.Canceled", lease, err)
	}
	if n := h.Count(t, key); n != 1 {
		t.Errorf("backend holds %d records for the key after two abandoned Locks, want the holder's 1", n)
	}
	got := make(chan error, 1)
	go func() {
		lease, err := c.Lock(testCtx(t), key)
		if err == nil {
			err = lease.Unlock(context.Background())
		}
		got <- err
	}()
	unlock(t, held)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(slack):
		t.Fatal("the next owner was delayed after abandoned Locks")
	}
}

// A waiter gets the key soon after Unlock, far sooner than the holder's TTL.
func testHandoff(t *testing.T, h Harness) {
	key := keyFor(t) + "k"
	a, b := h.client(t), h.client(t)
	held := lock(t, a, key, locker.WithTTL(time.Minute))
	got := make(chan time.Time, 1)
	go func() {
		lease, err := b.Lock(testCtx(t), key)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- time.Now()
		_ = lease.Unlock(context.Background())
	}()
	if h.FIFO {
		eventually(t, slack, "the waiter never queued", func() bool { return h.Count(t, key) == 2 })
	} else {
		// No backend state shows a waiter here; if it has not begun waiting
		// yet, the test is weaker, never wrong.
		time.Sleep(200 * time.Millisecond)
	}
	released := time.Now()
	unlock(t, held)
	select {
	case at, ok := <-got:
		if ok && at.Sub(released) > time.Second {
			t.Errorf("handoff took %v: is the waiter polling?", at.Sub(released))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter did not get the key within 10s of Unlock (TTL 1m)")
	}
}

func testFIFO(t *testing.T, h Harness) {
	if !h.FIFO {
		t.Skip("the harness declares no FIFO order for this backend")
	}
	const waiters = 5
	key := keyFor(t) + "k"
	held := lock(t, h.client(t), key)
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range waiters {
		l := h.client(t)
		wg.Go(func() {
			lease, err := l.Lock(testCtx(t), key)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			_ = lease.Unlock(context.Background())
		})
		eventually(t, slack, "waiter never queued", func() bool { return h.Count(t, key) == i+2 })
	}
	unlock(t, held)
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("waiters got the key in order %v, want arrival order", order)
		}
	}
}

func testInvalidInput(t *testing.T, h Harness) {
	p := keyFor(t)
	a := h.client(t)
	keys := map[string]string{
		"empty":        "",
		"513 bytes":    p + strings.Repeat("k", 513-len(p)),
		"invalid utf8": p + "\xff\xfe",
		"NUL":          p + "a\x00b",
	}
	for name, key := range keys {
		for op, call := range calls(a) {
			if lease, err := call(testCtx(t), key); !errors.Is(err, locker.ErrInvalidKey) {
				t.Errorf("%s with %s key = %v, %v; want ErrInvalidKey", op, name, lease, err)
			}
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second, locker.MaxTTL + time.Nanosecond} {
		for op, call := range calls(a) {
			if lease, err := call(testCtx(t), p+"k", locker.WithTTL(ttl)); !errors.Is(err, locker.ErrInvalidTTL) {
				t.Errorf("%s with TTL %v = %v, %v; want ErrInvalidTTL", op, ttl, lease, err)
			}
		}
	}
	if _, err := a.TryLock(testCtx(t), p+"k", locker.WithOwner("")); !errors.Is(err, locker.ErrInvalidOwner) {
		t.Errorf("TryLock with an empty owner = %v, want ErrInvalidOwner", err)
	}
	if n := h.Count(t, p); n != 0 {
		t.Errorf("bad input left %d records in the backend", n)
	}
	longest := p + strings.Repeat("k", locker.MaxKeyLen-len(p))
	unlock(t, tryLock(t, a, longest))
}

func calls(l locker.Locker) map[string]func(context.Context, string, ...locker.Option) (locker.Lease, error) {
	return map[string]func(context.Context, string, ...locker.Option) (locker.Lease, error){
		"Lock": l.Lock, "TryLock": l.TryLock,
	}
}

func testDoubleUnlock(t *testing.T, h Harness) {
	key := keyFor(t) + "k"
	a, b := h.client(t), h.client(t)
	lease := tryLock(t, a, key)
	unlock(t, lease)
	next := tryLock(t, b, key)
	if err := lease.Unlock(testCtx(t)); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("second Unlock = %v, want ErrNotHeld", err)
	}
	if err := lease.Refresh(testCtx(t)); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("Refresh after Unlock = %v, want ErrNotHeld", err)
	}
	if err := lease.Err(); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("Err after Unlock = %v, want ErrNotHeld", err)
	}
	select {
	case <-lease.Done():
	default:
		t.Error("Done not closed after Unlock")
	}
	if _, err := a.TryLock(testCtx(t), key); !errors.Is(err, locker.ErrLocked) {
		t.Errorf("double Unlock released the next owner's lock: TryLock = %v", err)
	}
	unlock(t, next)
}

func testClosed(t *testing.T, h Harness) {
	key := keyFor(t) + "k"
	a, b := h.NewLocker(t), h.client(t)
	lease := tryLock(t, a, key)
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for op, call := range calls(a) {
		if _, err := call(testCtx(t), key+"2"); !errors.Is(err, locker.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", op, err)
		}
	}
	if err := a.Close(); !errors.Is(err, locker.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	if err := lease.Unlock(testCtx(t)); !errors.Is(err, locker.ErrClosed) {
		t.Errorf("Unlock after Close = %v, want ErrClosed", err)
	}
	if err := lease.Refresh(testCtx(t)); !errors.Is(err, locker.ErrClosed) {
		t.Errorf("Refresh after Close = %v, want ErrClosed", err)
	}
	if adm, ok := a.(locker.Admin); ok {
		if _, err := adm.Status(testCtx(t), key); !errors.Is(err, locker.ErrClosed) {
			t.Errorf("Status after Close = %v, want ErrClosed", err)
		}
		if _, err := adm.List(testCtx(t), key); !errors.Is(err, locker.ErrClosed) {
			t.Errorf("List after Close = %v, want ErrClosed", err)
		}
		if err := adm.ForceUnlock(testCtx(t), key); !errors.Is(err, locker.ErrClosed) {
			t.Errorf("ForceUnlock after Close = %v, want ErrClosed", err)
		}
	}
	waitDone(t, lease, slack)
	ctx, cancel := context.WithTimeout(context.Background(), slack)
	defer cancel()
	next, err := b.Lock(ctx, key) // Close released it; the TTL is 15s
	if err != nil {
		t.Fatalf("key not released by Close: %v", err)
	}
	unlock(t, next)
}

func testCloseWakesWaiters(t *testing.T, h Harness) {
	key := keyFor(t) + "k"
	a, b := h.client(t), h.NewLocker(t)
	held := lock(t, a, key)
	got := make(chan error, 1)
	go func() {
		_, err := b.Lock(testCtx(t), key)
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // let it block; if not yet, it sees ErrClosed at once
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, locker.ErrClosed) {
			t.Errorf("Lock waiting during Close = %v, want ErrClosed", err)
		}
	case <-time.After(slack):
		t.Fatal("Close did not end a waiting Lock")
	}
	unlock(t, held)
}

func testNoLeak(t *testing.T, h Harness) {
	const keys, workers = 1000, 8
	p := keyFor(t)
	var wg sync.WaitGroup
	for w := range workers {
		l := h.client(t)
		wg.Go(func() {
			for i := w; i < keys; i += workers {
				lease, err := l.Lock(testCtx(t), fmt.Sprintf("%s%04d", p, i))
				if err != nil {
					t.Error(err)
					return
				}
				if err := lease.Unlock(context.Background()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Some backends reap empty parents asynchronously (ZooKeeper containers).
	eventually(t, 15*time.Second, "per-key records remain after 1,000 keys were locked and unlocked",
		func() bool { return h.Count(t, p) == 0 })
}

func testDo(t *testing.T, h Harness) {
	key := keyFor(t) + "k"
	a, b := h.client(t), h.client(t)
	boom := errors.New("boom")
	err := locker.Do(testCtx(t), a, key, func(ctx context.Context) error {
		if _, err := b.TryLock(ctx, key); !errors.Is(err, locker.ErrLocked) {
			t.Errorf("TryLock inside Do = %v, want ErrLocked", err)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("Do = %v, want fn's error", err)
	}
	unlock(t, tryLock(t, b, key)) // Do unlocked
}

func testDoLeaseLost(t *testing.T, h Harness) {
	key := keyFor(t) + "k"
	a := h.client(t)
	err := locker.Do(testCtx(t), a, key, func(ctx context.Context) error {
		<-ctx.Done() // the lease lapses: no keep-alive
		if cause := context.Cause(ctx); !errors.Is(cause, locker.ErrLeaseLost) {
			t.Errorf("fn's ctx ended with %v, want ErrLeaseLost", cause)
		}
		return nil
	}, locker.WithTTL(h.ttl()), locker.WithKeepAlive(false))
	if !errors.Is(err, locker.ErrLeaseLost) {
		t.Errorf("Do after the lease lapsed = %v, want ErrLeaseLost", err)
	}
}

func testAdmin(t *testing.T, h Harness) {
	p := keyFor(t)
	a, b := h.client(t), h.client(t)
	adm, ok := b.(locker.Admin)
	if !ok {
		t.Skip("this Locker does not implement locker.Admin")
	}
	ctx := testCtx(t)
	held := lock(t, a, p+"k", locker.WithTTL(h.ttl()))
	other := lock(t, a, p+"other")
	info, err := adm.Status(ctx, p+"k")
	if err != nil || info.Key != p+"k" || info.Owner != held.Owner() || info.Fence != held.Fence() || info.Holds != 1 {
		t.Errorf("Status = %+v, %v; want key, owner %q, fence %d, 1 hold", info, err, held.Owner(), held.Fence())
	}
	list, err := adm.List(ctx, p)
	if err != nil || len(list) != 2 || list[0].Key != p+"k" || list[1].Key != p+"other" {
		t.Errorf("List = %+v, %v; want the 2 held keys in order", list, err)
	}
	if err := adm.ForceUnlock(ctx, p+"k"); err != nil {
		t.Fatalf("ForceUnlock: %v", err)
	}
	waitDone(t, held, h.ttl()+slack)
	if err := held.Err(); !errors.Is(err, locker.ErrLeaseLost) {
		t.Errorf("force-unlocked lease Err = %v, want ErrLeaseLost", err)
	}
	if _, err := adm.Status(ctx, p+"k"); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("Status of a free key = %v, want ErrNotHeld", err)
	}
	if err := adm.ForceUnlock(ctx, p+"k"); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("ForceUnlock of a free key = %v, want ErrNotHeld", err)
	}
	unlock(t, tryLock(t, b, p+"k"))
	unlock(t, other)
}
