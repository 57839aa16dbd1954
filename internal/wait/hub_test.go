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

// A wake-one Hub wakes the longest-waiting waiter per Notify, and a waiter
// that leaves passes a wake on to the next, so none is lost.
func TestWakeOneHubWakesTheOldestAndPassesOn(t *testing.T) {
	hub := NewWakeOneHub(&fakeChannel{})
	ctx := context.Background()
	var ws []<-chan struct{}
	var stops []func()
	for range 3 {
		w, stop, err := hub.Subscribe(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		ws, stops = append(ws, w), append(stops, stop)
	}
	woken := func() (n []int) {
		for i, w := range ws {
			select {
			case <-w:
				n = append(n, i)
			default:
			}
		}
		return n
	}
	hub.Notify("k")
	if got := woken(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("Notify woke %v, want only the oldest, [0]", got)
	}
	stops[0]() // took the key, or gave up: the next hears of it
	ws[0] = nil
	if got := woken(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("after the oldest left, woken %v; want [1]", got)
	}
	hub.Notify("k")
	if got := woken(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("second Notify woke %v, want [1]", got)
	}
	hub.NotifyEvery("k")
	if got := woken(); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("NotifyEvery woke %v, want [1 2]", got)
	}
	stops[1]()
	stops[2]()
}
