package locker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locker-go/locker/driver"
)

// ctxHold: Refresh and Release block until their ctx ends (a blackholed
// backend whose client honours ctx); Release is quick unless slowRelease.
// called is closed when the first call comes.
type ctxHold struct {
	slowRelease bool
	releases    atomic.Int32
	called      chan struct{}
	once        sync.Once
}

func (h *ctxHold) enter() { h.once.Do(func() { close(h.called) }) }

func (h *ctxHold) Refresh(ctx context.Context) (time.Duration, error) {
	h.enter()
	<-ctx.Done()
	return 0, ctx.Err()
}
func (h *ctxHold) Release(ctx context.Context) error {
	h.releases.Add(1)
	if h.slowRelease {
		h.enter()
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// Unlock honours its ctx while a keep-alive renewal hangs.
func TestUnlockHonoursItsCtxWhileARenewalHangs(t *testing.T) {
	h := &ctxHold{called: make(chan struct{})}
	l, err := newLease(newLeaseSet(), leaseConfig{Key: "k", TTL: 900 * time.Millisecond, KeepAlive: true, Start: time.Now(), Hold: h})
	if err != nil {
		t.Fatal(err)
	}
	<-h.called // the renewal (at 300ms) hangs until the deadline (900ms)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = l.Unlock(ctx)
	if took := time.Since(start); took > 250*time.Millisecond {
		t.Errorf("Unlock with a 50ms ctx took %v (err %v, Err %v)", took, err, l.Err())
	}
}

// Close keeps its 5s bound while a user's Unlock (unbounded ctx) hangs on
// the backend.
func TestCloseIsBoundedWhileAnUnlockHangs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test waits out Close's 5s bound")
	}
	h := &ctxHold{slowRelease: true, called: make(chan struct{})}
	lk := New(&holdDriver{hold: h})
	lease, err := lk.Lock(context.Background(), "k", WithKeepAlive(false), WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	uctx, ucancel := context.WithCancel(context.Background())
	defer ucancel()
	go lease.Unlock(uctx) // hangs: backend blackholed
	<-h.called
	closed := make(chan error, 1)
	go func() { closed <- lk.Close() }()
	select {
	case <-closed:
	case <-time.After(closeTimeout + time.Second):
		t.Errorf("Close still blocked after %v (promised best-effort 5s)", closeTimeout+time.Second)
	}
}

// holdDriver grants hold on every Acquire; records Close and calls made after it.
type holdDriver struct {
	hold       driver.Hold
	dead       bool // grants arrive already past their validity
	attempts   atomic.Int64
	closed     atomic.Bool
	afterClose atomic.Int32
}

func (d *holdDriver) Acquire(context.Context, *driver.Request) (driver.Grant, error) {
	d.attempts.Add(1)
	g := driver.Grant{Hold: d.hold, Fence: 1}
	if d.dead {
		g.Start = time.Now().Add(-time.Hour)
	}
	return g, nil
}
func (d *holdDriver) Abandon(context.Context, *driver.Request) {}
func (d *holdDriver) Close(context.Context) error              { d.closed.Store(true); return nil }

// expHold is an Expirer whose Expire takes a while (a round trip).
type expHold struct {
	fakeOps
	d       *holdDriver
	expDone chan struct{}
}

func (h *expHold) Expire(context.Context) {
	time.Sleep(100 * time.Millisecond)
	if h.d.closed.Load() {
		h.d.afterClose.Add(1)
	}
	close(h.expDone)
}

// Driver.Close comes after the lease's Expire, which a lease that ended at
// its deadline runs in the background.
func TestDriverClosedAfterExpire(t *testing.T) {
	d := &holdDriver{}
	h := &expHold{d: d, expDone: make(chan struct{})}
	d.hold = h
	lk := New(d)
	lease, err := lk.Lock(context.Background(), "k", WithKeepAlive(false), WithTTL(30*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	<-lease.Done()
	if err := lk.Close(); err != nil {
		t.Fatal(err)
	}
	<-h.expDone
	if d.afterClose.Load() != 0 {
		t.Errorf("Expire was running in the driver after Locker.Close returned and Driver.Close was called")
	}
}

// Grants that keep arriving dead (a TTL shorter than the round trip) end
// the call with ErrInvalidTTL after a few, instead of an endless loop.
func TestDeadGrantsInARowEndTheCall(t *testing.T) {
	for name, call := range map[string]func(Locker) error{
		"Lock": func(l Locker) error {
			_, err := l.Lock(context.Background(), "k", WithTTL(time.Millisecond))
			return err
		},
		"TryLock": func(l Locker) error {
			_, err := l.TryLock(context.Background(), "k", WithTTL(time.Millisecond))
			return err
		},
	} {
		d := &holdDriver{hold: &fakeOps{}, dead: true}
		lk := New(d)
		if err := call(lk); !errors.Is(err, ErrInvalidTTL) || d.attempts.Load() != deadGrants {
			t.Errorf("%s = %v after %d attempts; want ErrInvalidTTL after %d", name, err, d.attempts.Load(), deadGrants)
		}
		lk.Close()
	}
}

// A grant that arrived dead and whose give-back fails (the backend out of
// reach) goes to the hold's Expire, as a lease's hold at its deadline:
// where the backend keeps it otherwise (an etcd entry on the Locker's
// kept-alive lease) the key would stay taken while the Locker lives.
func TestDeadGrantWhoseGiveBackFailsIsExpired(t *testing.T) {
	h := &unreachableHold{expired: make(chan struct{}, deadGrants)}
	d := &holdDriver{hold: h, dead: true}
	lk := New(d)
	defer lk.Close()
	if _, err := lk.TryLock(context.Background(), "k", WithTTL(time.Millisecond)); !errors.Is(err, ErrInvalidTTL) {
		t.Fatalf("TryLock = %v, want ErrInvalidTTL", err)
	}
	for i := range deadGrants {
		select {
		case <-h.expired:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d dead grants whose release failed went to Expire", i, deadGrants)
		}
	}
}

// unreachableHold's Release fails as against a backend out of reach; it
// is an Expirer.
type unreachableHold struct {
	fakeOps
	expired chan struct{}
}

func (h *unreachableHold) Release(context.Context) error {
	return Unavailable(errors.New("connection refused"))
}
func (h *unreachableHold) Expire(context.Context) { h.expired <- struct{}{} }

// Refusals that say "look again at once" (Retry 0) back off while they
// repeat, rather than polling every millisecond.
func TestZeroRetryBacksOff(t *testing.T) {
	s := &scripted{retry: 0, wake: make(chan struct{}, 1)}
	lk := New(notifying{s})
	defer lk.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	lk.Lock(ctx, "k")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attempts > 20 {
		t.Errorf("%d Acquire calls in 200ms while waiting with a Notifier", s.attempts)
	}
}

// slowSub's Subscribe is a round trip that ends with ctx.
type slowSub struct{ *scripted }

func (n slowSub) Subscribe(ctx context.Context, _ *driver.Request) (<-chan struct{}, func(), error) {
	<-ctx.Done()
	return nil, nil, ctx.Err()
}
func (n slowSub) Listening() bool { return false }

// ctx ends while Lock subscribes after a refusal: the key was held, so the
// error says so.
func TestCtxEndDuringSubscribeIsErrLocked(t *testing.T) {
	s := &scripted{retry: time.Hour}
	lk := New(slowSub{s})
	defer lk.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := lk.Lock(ctx, "k")
	if !errors.Is(err, ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock whose ctx ended while the key was held = %v; want ErrLocked and DeadlineExceeded", err)
	}
}

// adminDrv: Status returns some time after its ctx ends.
type adminDrv struct {
	holdDriver
	inStatusAfterClose atomic.Bool
	called             chan struct{}
}

func (a *adminDrv) Status(ctx context.Context, _ driver.Space, key string) (driver.LockInfo, error) {
	close(a.called)
	<-ctx.Done()
	time.Sleep(50 * time.Millisecond)
	if a.closed.Load() {
		a.inStatusAfterClose.Store(true)
	}
	return driver.LockInfo{}, ctx.Err()
}
func (a *adminDrv) List(context.Context, string) ([]driver.LockInfo, error) { return nil, nil }
func (a *adminDrv) ForceUnlock(context.Context, driver.Space, string) error { return nil }

// Close waits for admin calls under way before Driver.Close.
func TestCloseWaitsForAdminCalls(t *testing.T) {
	d := &adminDrv{called: make(chan struct{})}
	lk := New(d).(interface {
		Admin
		Locker
	})
	var wg sync.WaitGroup
	wg.Go(func() { lk.Status(context.Background(), "k") })
	<-d.called
	lk.Close()
	wg.Wait()
	if d.inStatusAfterClose.Load() {
		t.Error("Driver.Close was called while Status was still in the driver")
	}
}

// A refused TryLock whose ctx had ended loses ErrLocked in ctxErr.
func TestRefusedTryLockWithEndedCtxIsErrLocked(t *testing.T) {
	s := &scripted{}
	lk := New(s)
	defer lk.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := lk.TryLock(ctx, "k")
	if !errors.Is(err, ErrLocked) {
		t.Errorf("refused TryLock with an ended ctx = %v; no ErrLocked", err)
	}
}

// flakyRelease fails its first failures Releases, as a backend in the
// middle of a leader election does, then succeeds.
type flakyRelease struct {
	fakeOps
	failures int32
}

func (h *flakyRelease) Release(ctx context.Context) error {
	if h.releases.Add(1) <= h.failures {
		return Unavailable(errors.New("leader election"))
	}
	return nil
}

// An Unlock whose Release fails reports it, stops the renewals, and the
// release goes on in the background until it goes through: a caller that
// moves on does not keep the key, renewed, forever.
func TestFailedUnlockReleasesInTheBackground(t *testing.T) {
	h := &flakyRelease{failures: 2}
	l, err := newLease(newLeaseSet(), leaseConfig{Key: "k", TTL: 300 * time.Millisecond, KeepAlive: true, Start: time.Now(), Hold: h})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Unlock = %v, want the release's failure", err)
	}
	refreshes := h.refreshes.Load()
	waitDone(t, l)
	if !errors.Is(l.Err(), ErrNotHeld) || h.releases.Load() != 3 {
		t.Errorf("Err = %v after %d releases; want ErrNotHeld after 3", l.Err(), h.releases.Load())
	}
	if h.refreshes.Load() != refreshes {
		t.Errorf("%d renewals after the owner's Unlock", h.refreshes.Load()-refreshes)
	}
}

// An Unlock that gives up waiting for a hung renewal (its ctx ended) still
// lets the key go once the renewal is over, instead of renewing forever.
func TestUnlockCutShortByAHungRenewalReleasesLater(t *testing.T) {
	h := &hangingHold{letGo: make(chan struct{}), released: make(chan struct{}), refreshing: make(chan struct{})}
	l, err := newLease(newLeaseSet(), leaseConfig{Key: "k", TTL: time.Minute, KeepAlive: true, Start: time.Now().Add(-20 * time.Second), Hold: h})
	if err != nil {
		t.Fatal(err)
	}
	<-h.refreshing // the renewal due at once starts, and hangs
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Unlock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Unlock while a renewal hangs = %v, want its ctx's end", err)
	}
	close(h.letGo)
	select {
	case <-h.released:
	case <-time.After(5 * time.Second):
		t.Fatal("the key was not released after the renewal ended")
	}
	waitDone(t, l)
	if !errors.Is(l.Err(), ErrNotHeld) {
		t.Errorf("Err = %v, want ErrNotHeld", l.Err())
	}
}

// failingSub's Subscribe fails as unavailable the first fails times.
type failingSub struct {
	*scripted
	fails int
}

func (n *failingSub) Subscribe(ctx context.Context, r *driver.Request) (<-chan struct{}, func(), error) {
	n.mu.Lock()
	n.subscribed++
	failed := n.subscribed <= n.fails
	n.mu.Unlock()
	if failed {
		return nil, nil, Unavailable(errors.New("pub/sub down"))
	}
	return n.wake, func() {}, nil
}
func (n *failingSub) Listening() bool { return false }

// listeningFailingSub is failingSub whose subscriptions look free.
type listeningFailingSub struct{ *failingSub }

func (n listeningFailingSub) ListeningFor(*driver.Request) bool { return true }

// A subscription that looked free but fails (a Redis Cluster shard
// subscription that ended since, its master out of reach) does not fail
// the Lock: it attempts, unqueued, and subscribes after the refusal, as
// where subscribing is not free.
func TestLockOutlivesAFailedFreeSubscription(t *testing.T) {
	s := &scripted{grantAt: 3, retry: time.Millisecond, wake: make(chan struct{}, 1)}
	n := listeningFailingSub{&failingSub{scripted: s, fails: 1}}
	lockThrough(t, n)
	if want := []bool{false, true, true}; n.subscribed != 2 || !slices.Equal(s.queued, want) {
		t.Errorf("%d subscriptions, Queue per attempt %v; want 2 (the first failed) and %v", n.subscribed, s.queued, want)
	}
}

// A subscription that fails as unavailable does not fail a Lock whose
// attempts succeed: it waits on the holder's remaining TTL, subscribes
// again at each turn, and is granted.
func TestLockOutlivesAFailedSubscription(t *testing.T) {
	s := &scripted{grantAt: 4, retry: time.Millisecond, wake: make(chan struct{}, 1)}
	n := &failingSub{scripted: s, fails: 2}
	lockThrough(t, n)
	if n.subscribed != 3 || s.attempts != 4 {
		t.Errorf("%d subscriptions, %d attempts; want 3 (two failed) and 4", n.subscribed, s.attempts)
	}
}

// lockThrough locks "k" through a Locker over d, failing t unless it is
// granted.
func lockThrough(t *testing.T, d driver.Driver) {
	t.Helper()
	lk := New(d)
	defer lk.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := lk.Lock(ctx, "k")
	if err != nil {
		t.Fatalf("Lock = %v; want the grant", err)
	}
	_ = lease.Unlock(ctx)
}
