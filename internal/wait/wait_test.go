package wait

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/locker-go/locker"
)

// fakeChannel records backend (un)subscribe calls in order.
type fakeChannel struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeChannel) Subscribe(_ context.Context, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "sub "+key)
	return nil
}

func (f *fakeChannel) Unsubscribe(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "unsub "+key)
}

type fakeLease struct{ locker.Lease }

func TestUntilSubscribesOnlyWhenContended(t *testing.T) {
	ch := &fakeChannel{}
	hub := NewHub(ch)
	got, err := Until(context.Background(), "k",
		func(context.Context) (locker.Lease, time.Duration, error) { return fakeLease{}, 0, nil },
		func(ctx context.Context) (<-chan struct{}, func(), error) { return hub.Subscribe(ctx, "k") })
	if err != nil || got == nil || len(ch.calls) != 0 {
		t.Fatalf("uncontended Until = %v, %v with backend calls %v; want the lease and no subscription", got, err, ch.calls)
	}
}

func TestUntilWakesOnNotify(t *testing.T) {
	ch := &fakeChannel{}
	hub := NewHub(ch)
	var mu sync.Mutex
	free := false
	attempts := 0
	attempt := func(context.Context) (locker.Lease, time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		attempts++
		if free {
			return fakeLease{}, 0, nil
		}
		return nil, time.Hour, locker.ErrLocked // only a notification can end the wait
	}
	done := make(chan error, 1)
	go func() {
		_, err := Until(context.Background(), "k", attempt,
			func(ctx context.Context) (<-chan struct{}, func(), error) { return hub.Subscribe(ctx, "k") })
		done <- err
	}()
	for len(hub.Keys()) == 0 {
		time.Sleep(time.Millisecond) // until the waiter has subscribed
	}
	mu.Lock()
	free = true
	mu.Unlock()
	hub.Notify("k")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("notification did not wake the waiter")
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.calls) != 2 || ch.calls[0] != "sub k" || ch.calls[1] != "unsub k" {
		t.Errorf("backend calls %v, want one subscribe then one unsubscribe", ch.calls)
	}
}

func TestUntilFallbackTimer(t *testing.T) {
	hub := NewHub(&fakeChannel{})
	n := 0
	_, err := Until(context.Background(), "k",
		func(context.Context) (locker.Lease, time.Duration, error) {
			if n++; n < 3 {
				return nil, 10 * time.Millisecond, locker.ErrLocked
			}
			return fakeLease{}, 0, nil
		},
		func(ctx context.Context) (<-chan struct{}, func(), error) { return hub.Subscribe(ctx, "k") })
	if err != nil || n != 3 {
		t.Fatalf("Until = %v after %d attempts; the fallback timer should retry without a notification", err, n)
	}
}

func TestUntilContextAndClose(t *testing.T) {
	hub := NewHub(&fakeChannel{})
	locked := func(context.Context) (locker.Lease, time.Duration, error) { return nil, time.Hour, locker.ErrLocked }
	sub := func(ctx context.Context) (<-chan struct{}, func(), error) { return hub.Subscribe(ctx, "k") }

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := Until(ctx, "k", locked, sub); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Until past the deadline = %v, want DeadlineExceeded", err)
	}
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(locker.ErrClosed)
	if _, err := Until(ctx, "k", locked, sub); !errors.Is(err, locker.ErrClosed) {
		t.Errorf("Until on a closed locker = %v, want ErrClosed", err)
	}
	if keys := hub.Keys(); len(keys) != 0 {
		t.Errorf("waiters left behind: %v", keys)
	}
}

func TestHubSharesOneSubscriptionPerKey(t *testing.T) {
	ch := &fakeChannel{}
	hub := NewHub(ch)
	w1, un1, _ := hub.Subscribe(context.Background(), "k")
	w2, un2, _ := hub.Subscribe(context.Background(), "k")
	_, un3, _ := hub.Subscribe(context.Background(), "other")
	hub.Notify("k")
	for i, w := range []<-chan struct{}{w1, w2} {
		select {
		case <-w:
		default:
			t.Errorf("waiter %d not woken", i)
		}
	}
	un1()
	un2()
	un3()
	want := []string{"sub k", "sub other", "unsub k", "unsub other"}
	if len(ch.calls) != len(want) {
		t.Fatalf("backend calls %v, want %v", ch.calls, want)
	}
	for i := range want {
		if ch.calls[i] != want[i] {
			t.Fatalf("backend calls %v, want %v", ch.calls, want)
		}
	}
}

func TestSubscribedAttemptsFirstThenWaits(t *testing.T) {
	wake := make(chan struct{}, 1)
	n := 0
	done := make(chan error, 1)
	go func() {
		_, err := Subscribed(context.Background(), "k", func(context.Context) (locker.Lease, time.Duration, error) {
			if n++; n == 1 {
				wake <- struct{}{} // a release lands right after our first look
				return nil, time.Hour, locker.ErrLocked
			}
			return fakeLease{}, 0, nil
		}, wake)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil || n != 2 {
			t.Fatalf("Subscribed = %v after %d attempts; the pending wake should bring the second at once", err, n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a wake pending since the first attempt was missed")
	}
}
