package redsync

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locker-go/locker"
)

// A re-entry or a refresh with a shorter TTL must never shorten the
// record another hold of the same owner relies on (review item 1).
func TestReentryNeverShortensExpiry(t *testing.T) {
	l, clients := plainLocker(t)
	other, _ := plainLocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := uniqueKey(t, "k")
	owner := "x-" + key
	const short = 300 * time.Millisecond

	first, err := l.Lock(ctx, key, locker.WithOwner(owner), locker.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Unlock(context.Background())
	second, err := l.Lock(ctx, key, locker.WithOwner(owner), locker.WithTTL(short), locker.WithKeepAlive(false))
	if err != nil {
		t.Fatal(err)
	}
	for phase, op := range map[string]func() error{
		"re-entry": func() error { return nil },
		"refresh":  func() error { return second.Refresh(ctx) },
	} {
		if err := op(); err != nil {
			t.Fatalf("%s: %v", phase, err)
		}
		for i, c := range clients {
			if o, _, pttl := masterRecord(t, l, c, key); o != owner || pttl < 20*time.Second {
				t.Errorf("after the short hold's %s, master %d: owner %q, PTTL %v; want %q and the first hold's ~30s", phase, i, o, pttl, owner)
			}
		}
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	<-time.After(2 * short) // the short hold's TTL must pass: time itself is the condition

	if ls, err := other.TryLock(ctx, key); !errors.Is(err, locker.ErrLocked) {
		if ls != nil {
			_ = ls.Unlock(ctx)
		}
		t.Fatalf("another owner's TryLock while the first hold is live = %v, want ErrLocked", err)
	}
	if err := first.Err(); err != nil {
		t.Fatalf("first hold: %v", err)
	}
}
