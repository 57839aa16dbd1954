package locker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/locker-go/locker/driver"
)

// scripted is a driver.Driver whose Acquire grants from attempt n on, to
// test the portable loop alone. With notify it is a driver.Notifier.
type scripted struct {
	grantAt int // the attempt (1-based) that is granted; 0: never
	retry   time.Duration

	mu         sync.Mutex
	attempts   int
	queued     []bool // r.Queue at each attempt
	subscribed int
	abandoned  []*driver.Request
	wake       chan struct{}
	second     chan struct{} // closed at the second attempt, if set
	deadFirst  *fakeOps      // if set, the first grant is this hold, already expired
}

func (s *scripted) Acquire(_ context.Context, r *driver.Request) (driver.Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	s.queued = append(s.queued, r.Queue)
	if s.attempts == 2 && s.second != nil {
		close(s.second)
	}
	if s.deadFirst != nil && s.attempts == 1 {
		return driver.Grant{Hold: s.deadFirst, Fence: 1, Start: time.Now().Add(-time.Hour)}, nil
	}
	if s.grantAt > 0 && s.attempts >= s.grantAt {
		return driver.Grant{Hold: &fakeOps{}, Fence: 1}, nil
	}
	return driver.Grant{Retry: s.retry}, nil
}

func (s *scripted) Abandon(_ context.Context, r *driver.Request) {
	s.mu.Lock()
	s.abandoned = append(s.abandoned, r)
	s.mu.Unlock()
}

func (s *scripted) Close(context.Context) error { return nil }

type notifying struct{ *scripted }

func (n notifying) Subscribe(context.Context, *driver.Request) (<-chan struct{}, func(), error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.subscribed++
	return n.wake, func() {}, nil
}

func (n notifying) Listening() bool { return false }

// keyListening is a notifying driver whose subscriptions cost no round
// trip for one key alone (driver.KeyListener), though Listening says no.
type keyListening struct {
	notifying
	free string
}

func (k keyListening) ListeningFor(r *driver.Request) bool { return r.Key == k.free }

// A KeyListener is asked per request: a Lock on a key it listens for
// subscribes before its first attempt, which queues; on another key the
// first attempt comes first, unqueued, as where Listening is false.
func TestLockAsksListeningPerKey(t *testing.T) {
	for _, tc := range []struct {
		key    string
		queued []bool
	}{{"free", []bool{true, true}}, {"other", []bool{false, true}}} {
		s := &scripted{grantAt: 2, retry: time.Hour, wake: make(chan struct{}, 1)}
		s.wake <- struct{}{} // the release the refused, queued attempt waits for
		l := New(keyListening{notifying{s}, "free"})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := l.Lock(ctx, tc.key); err != nil {
			t.Fatal(err)
		}
		cancel()
		l.Close()
		if s.subscribed != 1 || !slices.Equal(s.queued, tc.queued) {
			t.Errorf("Lock(%q): %d subscriptions, Queue per attempt %v; want 1 and %v", tc.key, s.subscribed, s.queued, tc.queued)
		}
	}
}

func TestLockUncontendedDoesNotSubscribe(t *testing.T) {
	s := &scripted{grantAt: 1, wake: make(chan struct{}, 1)}
	l := New(notifying{s})
	defer l.Close()
	if _, err := l.Lock(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if s.subscribed != 0 || s.attempts != 1 {
		t.Errorf("uncontended Lock: %d subscriptions, %d attempts; want 0 and 1", s.subscribed, s.attempts)
	}
}

// A refused Lock subscribes, looks again at once (a release may have come
// in between), then sleeps until notified: the Retry of an hour never runs.
func TestLockWaitsForNotification(t *testing.T) {
	s := &scripted{grantAt: 3, retry: time.Hour, wake: make(chan struct{}, 1), second: make(chan struct{})}
	l := New(notifying{s})
	defer l.Close()
	go func() {
		<-s.second // the attempt made while subscribed was refused: release
		s.wake <- struct{}{}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.Lock(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if s.subscribed != 1 || len(s.queued) != 3 || s.queued[0] || !s.queued[1] || !s.queued[2] {
		t.Errorf("%d subscriptions, Queue per attempt %v; want 1 and [false true true]", s.subscribed, s.queued)
	}
}

// Without a Notifier, a waiter looks again when the holder's lease would
// lapse (Grant.Retry).
func TestLockFallsBackToRetry(t *testing.T) {
	s := &scripted{grantAt: 3, retry: 5 * time.Millisecond}
	l := New(s)
	defer l.Close()
	if _, err := l.Lock(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if s.attempts != 3 {
		t.Errorf("%d attempts, want 3", s.attempts)
	}
}

func TestFailedCallsAbandon(t *testing.T) {
	s := &scripted{retry: time.Hour, wake: make(chan struct{}, 1)}
	l := New(notifying{s})
	defer l.Close()
	if _, err := l.TryLock(context.Background(), "k"); !errors.Is(err, ErrLocked) {
		t.Fatalf("TryLock = %v, want ErrLocked", err)
	}
	if len(s.abandoned) != 0 {
		t.Errorf("a refused TryLock abandoned %d calls; a refusal leaves nothing to undo", len(s.abandoned))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past its deadline = %v", err)
	}
	if len(s.abandoned) != 1 || !s.abandoned[0].Queue || s.abandoned[0].Key != "k" {
		t.Errorf("abandoned %+v; want the queued Lock call on k", s.abandoned)
	}
}

func TestInvalidInputReachesNoDriver(t *testing.T) {
	s := &scripted{grantAt: 1}
	l := New(s)
	defer l.Close()
	for _, call := range []func() error{
		func() error { _, err := l.Lock(context.Background(), ""); return err },
		func() error { _, err := l.TryLock(context.Background(), "k", WithTTL(-1)); return err },
	} {
		if err := call(); !errors.Is(err, ErrInvalidKey) && !errors.Is(err, ErrInvalidTTL) {
			t.Errorf("bad input = %v", err)
		}
	}
	if s.attempts != 0 {
		t.Errorf("bad input reached the driver %d times", s.attempts)
	}
}

// A grant whose reply came after its validity ran out is given back, and
// the key asked for again (issue 13, defect 3): never a dead lease.
func TestLockNeverReturnsADeadLease(t *testing.T) {
	for name, call := range map[string]func(Locker) (Lease, error){
		"Lock":    func(l Locker) (Lease, error) { return l.Lock(context.Background(), "k") },
		"TryLock": func(l Locker) (Lease, error) { return l.TryLock(context.Background(), "k") },
	} {
		dead := &fakeOps{}
		s := &scripted{grantAt: 1, deadFirst: dead}
		l := New(s)
		lease, err := call(l)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !lease.Deadline().After(time.Now()) || dead.releases.Load() != 1 || s.attempts != 2 {
			t.Errorf("%s: Deadline %v, dead hold released %d times, %d attempts; want a live lease, the dead hold given back, 2 attempts",
				name, lease.Deadline(), dead.releases.Load(), s.attempts)
		}
		l.Close()
	}
}
