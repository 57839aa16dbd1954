package zookeeper

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// A Locker from Open reasons with the session timeout the server granted:
// asked for less than the server's minimum (1s in scripts/backends), it
// refuses TTLs below the granted value and says why.
func TestNegotiatedSessionTimeout(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	su := *u
	su.RawQuery = "session_timeout=300ms"
	l, err := locker.Open(context.Background(), su.String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	z := l.(*Locker)
	for end := time.Now().Add(5 * time.Second); z.negotiated.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(end) { // logged right after the session is made
			t.Fatal("negotiated session timeout not learnt")
		}
	}
	short, long := z.sessionTimeouts()
	if short != 300*time.Millisecond || long <= short {
		t.Fatalf("session timeouts = %v, %v; want 300ms asked and more granted", short, long)
	}
	_, err = l.TryLock(context.Background(), "zk-negotiated/"+t.Name(), locker.WithTTL(500*time.Millisecond))
	if long > 500*time.Millisecond && (!errors.Is(err, locker.ErrInvalidTTL) || !strings.Contains(err.Error(), "raised")) {
		t.Errorf("TryLock with a TTL below the granted session timeout %v = %v; want ErrInvalidTTL saying the server raised it", long, err)
	}
}
