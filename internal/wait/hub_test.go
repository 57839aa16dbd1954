package wait

import (
	"context"
	"sync"
	"testing"
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
