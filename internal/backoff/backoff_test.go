package backoff

import (
	"context"
	"testing"
	"time"
)

func TestRetryDoublesUpToMax(t *testing.T) {
	var at []time.Time
	ok := Retry(context.Background(), Policy{Min: time.Millisecond, Max: 4 * time.Millisecond}, func(context.Context) bool {
		at = append(at, time.Now())
		return len(at) == 5
	})
	if !ok || len(at) != 5 {
		t.Fatalf("Retry = %v after %d attempts; want true after 5", ok, len(at))
	}
	for i, min := range []time.Duration{1, 2, 4, 4} {
		if gap := at[i+1].Sub(at[i]); gap < min*time.Millisecond {
			t.Errorf("wait %d was %v, want at least %v", i, gap, min*time.Millisecond)
		}
	}
}

func TestRetryStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	ok := Retry(ctx, Policy{Min: time.Millisecond, Max: time.Millisecond, Jitter: true}, func(context.Context) bool {
		if n++; n == 3 {
			cancel()
		}
		return false
	})
	if ok || n != 3 {
		t.Errorf("Retry = %v after %d attempts; want false after 3", ok, n)
	}
}

// A wait that would end after Policy.Until is not begun: the caller learns
// at once that no attempt could follow it.
func TestRetryStopsBeforeUntil(t *testing.T) {
	start := time.Now()
	n := 0
	ok := Retry(context.Background(), Policy{Min: time.Hour, Max: time.Hour, Until: start.Add(time.Minute)}, func(context.Context) bool {
		n++
		return false
	})
	if ok || n != 1 || time.Since(start) > time.Second {
		t.Errorf("Retry = %v after %d attempts and %v; want false after 1, at once", ok, n, time.Since(start))
	}
}

func TestUntilEndsWithAnyChannel(t *testing.T) {
	a, b := make(chan struct{}), make(chan struct{})
	ctx, cancel := Until(context.Background(), a, b)
	defer cancel()
	close(b)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context did not end when a channel closed")
	}
}
