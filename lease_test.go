package locker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeOps scripts a driver.Hold's answers, to test the shared mechanics alone.
type fakeOps struct {
	refreshErr atomic.Value // error or nil-box
	refreshes  atomic.Int32
	releases   atomic.Int32
	expired    chan struct{}
}

type errBox struct{ err error }

func (f *fakeOps) Refresh(context.Context) (time.Duration, error) {
	f.refreshes.Add(1)
	if b, _ := f.refreshErr.Load().(errBox); b.err != nil {
		return 0, b.err
	}
	return 300 * time.Millisecond, nil
}

func (f *fakeOps) Release(context.Context) error { f.releases.Add(1); return nil }

func (f *fakeOps) Expire(context.Context) {
	if f.expired != nil {
		close(f.expired)
	}
}

func startLease(t *testing.T, ops *fakeOps, keepAlive bool) (*lease, *leaseSet) {
	t.Helper()
	set := newLeaseSet()
	l, err := newLease(set, leaseConfig{Key: "k", Owner: "o", Fence: 7, TTL: 300 * time.Millisecond, KeepAlive: keepAlive, Start: time.Now(), Hold: ops})
	if err != nil {
		t.Fatal(err)
	}
	return l, set
}

func waitDone(t *testing.T, l *lease) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lease never ended")
	}
}

func TestKeepAliveRenews(t *testing.T) {
	ops := &fakeOps{}
	l, _ := startLease(t, ops, true)
	first := l.Deadline()
	deadline := time.After(5 * time.Second)
	for ops.refreshes.Load() < 3 { // three renewals outlive the 300ms TTL
		select {
		case <-l.Done():
			t.Fatalf("kept-alive lease ended: %v", l.Err())
		case <-deadline:
			t.Fatal("keep-alive did not renew")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if !l.Deadline().After(first) {
		t.Error("renewals did not move the deadline")
	}
	if err := l.Unlock(context.Background()); err != nil || !errors.Is(l.Err(), ErrNotHeld) {
		t.Fatalf("Unlock = %v, Err = %v", err, l.Err())
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, ErrNotHeld) || ops.releases.Load() != 1 {
		t.Errorf("second Unlock = %v after %d releases; want ErrNotHeld and no second release", err, ops.releases.Load())
	}
}

func TestFailingRenewalsLoseAtDeadline(t *testing.T) {
	ops := &fakeOps{}
	ops.refreshErr.Store(errBox{Unavailable(errors.New("down"))})
	l, _ := startLease(t, ops, true)
	waitDone(t, l)
	if !errors.Is(l.Err(), ErrLeaseLost) {
		t.Errorf("Err = %v, want ErrLeaseLost", l.Err())
	}
	if time.Now().Before(l.Deadline()) {
		t.Error("lease ended before its deadline while renewals were merely failing")
	}
	if n := ops.refreshes.Load(); n < 2 {
		t.Errorf("only %d renewal attempts before giving up", n)
	}
}

func TestNotHeldLosesAtOnce(t *testing.T) {
	ops := &fakeOps{}
	ops.refreshErr.Store(errBox{ErrNotHeld})
	l, _ := startLease(t, ops, false)
	if err := l.Refresh(context.Background()); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Refresh = %v, want ErrNotHeld", err)
	}
	waitDone(t, l)
	if !errors.Is(l.Err(), ErrLeaseLost) {
		t.Errorf("Err = %v, want ErrLeaseLost", l.Err())
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, ErrNotHeld) || ops.releases.Load() != 0 {
		t.Errorf("Unlock of a lost lease = %v with %d releases; want ErrNotHeld, none", err, ops.releases.Load())
	}
}

func TestNoKeepAliveExpiresAndCallsExpirer(t *testing.T) {
	ops := &fakeOps{expired: make(chan struct{})}
	l, _ := startLease(t, ops, false)
	waitDone(t, l)
	if !errors.Is(l.Err(), ErrLeaseLost) || ops.refreshes.Load() != 0 {
		t.Errorf("Err = %v after %d refreshes; want ErrLeaseLost, none", l.Err(), ops.refreshes.Load())
	}
	select {
	case <-ops.expired:
	case <-time.After(5 * time.Second):
		t.Fatal("Expirer not called")
	}
}

func TestSetClose(t *testing.T) {
	ops := &fakeOps{}
	l, set := startLease(t, ops, true)
	ctx, stop := set.context(context.Background())
	defer stop()
	if err := set.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ops.releases.Load() != 1 || !errors.Is(l.Err(), ErrNotHeld) {
		t.Errorf("Close: %d releases, Err %v; want 1 and ErrNotHeld", ops.releases.Load(), l.Err())
	}
	<-ctx.Done() // cancelled by Close, from a goroutine of its own
	if !errors.Is(context.Cause(ctx), ErrClosed) {
		t.Errorf("set context cause = %v, want ErrClosed", context.Cause(ctx))
	}
	if err := set.close(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v", err)
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Unlock after Close = %v", err)
	}
	if _, err := newLease(set, leaseConfig{TTL: time.Second, Start: time.Now(), Hold: ops}); !errors.Is(err, ErrClosed) || ops.releases.Load() != 2 {
		t.Errorf("newLease on a closed set = %v; want ErrClosed and the hold released", err)
	}
}

func TestConcurrentUnlockReleasesOnce(t *testing.T) {
	ops := &fakeOps{}
	l, _ := startLease(t, ops, true)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _ = l.Unlock(context.Background()) })
	}
	wg.Wait()
	if !errors.Is(l.Err(), ErrNotHeld) || ops.releases.Load() != 1 {
		t.Errorf("Err = %v after %d releases; want ErrNotHeld after 1", l.Err(), ops.releases.Load())
	}
}

func TestLostEndsLease(t *testing.T) {
	lost, lose := context.WithCancel(context.Background())
	l, err := newLease(newLeaseSet(), leaseConfig{Key: "k", TTL: time.Minute, KeepAlive: true, Start: time.Now(), Hold: &fakeOps{}, Lost: lost})
	if err != nil {
		t.Fatal(err)
	}
	lose() // the backend says the hold is gone
	waitDone(t, l)
	if !errors.Is(l.Err(), ErrLeaseLost) {
		t.Errorf("Err = %v, want ErrLeaseLost", l.Err())
	}
}

// hangingHold's Refresh ignores its context and answers only when let go,
// as a client does whose server stopped answering without closing the
// connection.
type hangingHold struct {
	fakeOps
	letGo      chan struct{}
	released   chan struct{}
	refreshing chan struct{} // if set, closed when the first Refresh begins
	once       sync.Once
}

func (h *hangingHold) Release(ctx context.Context) error {
	close(h.released) // a second Release would panic: the test wants one
	return h.fakeOps.Release(ctx)
}

func (h *hangingHold) Refresh(context.Context) (time.Duration, error) {
	h.refreshes.Add(1)
	if h.refreshing != nil {
		h.once.Do(func() { close(h.refreshing) })
	}
	<-h.letGo
	return 300 * time.Millisecond, nil
}

// Done closes at the deadline by the local clock even while a renewal
// hangs; a renewal that lands after all gives the key up.
func TestDoneAtDeadlineWhileRenewalHangs(t *testing.T) {
	h := &hangingHold{letGo: make(chan struct{}), released: make(chan struct{})}
	l, err := newLease(newLeaseSet(), leaseConfig{Key: "k", TTL: 300 * time.Millisecond, KeepAlive: true, Start: time.Now(), Hold: h})
	if err != nil {
		t.Fatal(err)
	}
	deadline := l.Deadline()
	waitDone(t, l)
	// The timer fires at the deadline; allow for a loaded machine, far
	// below the hang, which lasts until the test lets it go.
	if late := time.Since(deadline); late > 250*time.Millisecond {
		t.Errorf("Done closed %v after the deadline while a renewal hung", late)
	}
	if !errors.Is(l.Err(), ErrLeaseLost) || h.refreshes.Load() != 1 {
		t.Errorf("Err = %v after %d renewals; want ErrLeaseLost after the one that hangs", l.Err(), h.refreshes.Load())
	}
	close(h.letGo)
	select {
	case <-h.released:
	case <-time.After(5 * time.Second):
		t.Fatal("the late renewal's hold was not given up")
	}
}
