package zookeeper

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// zLocker is a Locker from openZ with its driver, whose state the tests
// inspect.
type zLocker struct {
	locker.Locker
	*zkDriver
}

// openZ opens a Locker on u with extra options, closed when t ends.
func openZ(t *testing.T, u *url.URL, opts ...Option) *zLocker {
	t.Helper()
	d, err := openWith(context.Background(), u, opts...)
	if err != nil {
		t.Fatal(err)
	}
	l := locker.New(d)
	t.Cleanup(func() { _ = l.Close() })
	return &zLocker{l, d}
}

func TestRung(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{
		time.Second: time.Second, 1999 * time.Millisecond: time.Second, 2 * time.Second: 2 * time.Second,
		3 * time.Second: 2 * time.Second, 15 * time.Second: 8 * time.Second, time.Hour: 2048 * time.Second,
		600 * time.Millisecond: 500 * time.Millisecond, time.Microsecond: time.Second / 8, 200 * time.Millisecond: time.Second / 8,
	} {
		if got := rung(ttl); got != want {
			t.Errorf("rung(%v) = %v, want %v", ttl, got, want)
		}
	}
}

// A Locker from a URL with session_timeout is pinned to that session and
// reasons with the timeout the server granted: asked for less than the
// server's minimum (1s in scripts/backends), it refuses TTLs below the
// granted value and says why.
func TestNegotiatedSessionTimeout(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	su := *u
	su.RawQuery = "session_timeout=300ms"
	z := openZ(t, &su)
	if z.dial != nil {
		t.Fatal("a Locker with session_timeout is not pinned to its session")
	}
	if z.primary.negotiated.Load() == 0 { // Open waits for it
		t.Fatal("negotiated session timeout not learnt by the end of Open")
	}
	short, long := z.primary.timeouts()
	if short != 300*time.Millisecond || long <= short {
		t.Fatalf("session timeouts = %v, %v; want 300ms asked and more granted", short, long)
	}
	_, err := z.TryLock(context.Background(), "zk-negotiated/"+t.Name(), locker.WithTTL(500*time.Millisecond))
	if long > 500*time.Millisecond && (!errors.Is(err, locker.ErrInvalidTTL) || !strings.Contains(err.Error(), "raised")) {
		t.Errorf("TryLock with a TTL below the granted session timeout %v = %v; want ErrInvalidTTL saying the server raised it", long, err)
	}
}

// sessionOf returns the id of the session that owns the lock node of l's key.
func sessionOf(t *testing.T, z *zLocker, key string) int64 {
	t.Helper()
	info, paths, err := z.holders(context.Background(), driver.Plain, key)
	if err != nil || len(paths) != 1 {
		t.Fatalf("holders(%s) = %+v, %v, %v", key, info, paths, err)
	}
	path := paths[0]
	ok, st, err := z.primary.conn.Exists(path)
	if err != nil || !ok {
		t.Fatalf("Exists(%s) = %v, %v", path, ok, err)
	}
	return st.EphemeralOwner
}

// heldSession returns the session of z's hold of key.
func heldSession(t *testing.T, z *zLocker, key string) *session {
	t.Helper()
	z.mu.Lock()
	defer z.mu.Unlock()
	for h := range z.holds {
		if strings.HasPrefix(h.path, z.cfg.root+"/"+escape(key)+"/") {
			return h.s
		}
	}
	t.Fatalf("no hold of %s", key)
	return nil
}

// A default Locker gives each rung of TTLs a session of its own, with a
// timeout at most the TTL, and shares it among TTLs of the same rung.
func TestSessionPerTTL(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	z := openZ(t, u)
	ctx := context.Background()
	p := "zk-rungs/" + strings.ToLower(t.Name()) + "/"
	ttls := []time.Duration{2 * time.Second, 3 * time.Second, 5 * time.Second, locker.DefaultTTL}
	owners := map[time.Duration]int64{}
	for _, ttl := range ttls {
		key := p + ttl.String()
		l, err := z.TryLock(ctx, key, locker.WithTTL(ttl))
		if err != nil {
			t.Fatalf("TryLock with TTL %v: %v", ttl, err)
		}
		defer l.Unlock(ctx)
		if short, long := heldSession(t, z, key).timeouts(); long > ttl || short < ttl/2 {
			t.Errorf("TTL %v held through a session of %v..%v; want within [TTL/2, TTL]", ttl, short, long)
		}
		owners[ttl] = sessionOf(t, z, key)
	}
	if owners[2*time.Second] != owners[3*time.Second] {
		t.Error("TTLs 2s and 3s (the same rung) were given different sessions")
	}
	if owners[2*time.Second] == owners[5*time.Second] || owners[5*time.Second] == owners[locker.DefaultTTL] {
		t.Errorf("TTLs of different rungs share a session: %v", owners)
	}
	if owners[locker.DefaultTTL] != z.primary.conn.SessionID() {
		t.Error("the default TTL's lock is not in the session Open made")
	}
	z.mu.Lock()
	n := len(z.sessions)
	z.mu.Unlock()
	if n != 3 {
		t.Errorf("%d sessions for 3 rungs", n)
	}
}

// A TTL below the server's minimum session timeout is refused, naming the
// minimum, before anything is created; a TTL at the minimum works.
func TestTTLBelowServerMinimum(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	z := openZ(t, u)
	// The key's node outlives the lease: a key of its own each run.
	key := "zk-min/" + strings.ToLower(t.Name()+"-"+rand.Text())
	for range 2 { // the first asks the server, the second knows
		_, err := z.TryLock(context.Background(), key, locker.WithTTL(10*time.Millisecond))
		if !errors.Is(err, locker.ErrInvalidTTL) {
			t.Fatalf("TryLock with TTL 10ms = %v, want ErrInvalidTTL", err)
		}
		z.mu.Lock()
		minimum := z.minS
		z.mu.Unlock()
		if minimum <= 10*time.Millisecond || !strings.Contains(err.Error(), "minimum session timeout "+minimum.String()) {
			t.Errorf("error %q does not name the server's minimum %v", err, minimum)
		}
	}
	ok, _, err := z.primary.conn.Exists(z.cfg.root + "/" + escape(key))
	if err != nil || ok {
		t.Errorf("refused TryLock left the key's node (%v, %v)", ok, err)
	}
	z.mu.Lock()
	minimum := z.minS
	z.mu.Unlock()
	l, err := z.TryLock(context.Background(), key, locker.WithTTL(minimum))
	if err != nil {
		t.Fatalf("TryLock with the server's minimum %v as TTL: %v", minimum, err)
	}
	_ = l.Unlock(context.Background())
}

// An extra session with no lock on it is closed after the idle timeout
// (the primary stays), and opened again when a TTL needs it.
func TestIdleSessionClosed(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	z := openZ(t, u, withIdleTimeout(200*time.Millisecond))
	key := "zk-idle/" + strings.ToLower(t.Name())
	ctx := context.Background()
	l, err := z.TryLock(ctx, key, locker.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s := heldSession(t, z, key)
	time.Sleep(400 * time.Millisecond) // longer than the idle timeout, while held
	if s.conn.State() != zk.StateHasSession {
		t.Fatal("a session with a hold on it was closed")
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.quit:
	case <-time.After(10 * time.Second):
		t.Fatal("idle session not closed within 10s")
	}
	if z.primary.closed {
		t.Error("the primary session was closed as idle")
	}
	again, err := z.TryLock(ctx, key, locker.WithTTL(2*time.Second))
	if err != nil {
		t.Fatalf("TryLock after the session was retired: %v", err)
	}
	defer again.Unlock(ctx)
	if sessionOf(t, z, key) == s.conn.SessionID() {
		t.Error("the retired session was used again")
	}
}

// Re-entry keeps the node, hence its session: a TTL below that session's
// timeout is refused, one at or above it re-enters.
func TestReentryKeepsSession(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	z := openZ(t, u)
	key, me, ctx := "zk-reenter/"+strings.ToLower(t.Name()), locker.WithOwner("me"), context.Background()
	held, err := z.TryLock(ctx, key, me, locker.WithTTL(8*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	if _, err := z.TryLock(ctx, key, me, locker.WithTTL(2*time.Second)); !errors.Is(err, locker.ErrInvalidTTL) {
		t.Errorf("re-entry with TTL 2s on a node of an 8s session = %v, want ErrInvalidTTL", err)
	}
	again, err := z.TryLock(ctx, key, me, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("re-entry with a longer TTL: %v", err)
	}
	if again.Fence() != held.Fence() {
		t.Errorf("re-entry fence %d, want %d", again.Fence(), held.Fence())
	}
	if info, err := z.Locker.(locker.Admin).Status(ctx, key); err != nil || info.Holds != 2 {
		t.Errorf("Status of a re-entered key = %+v, %v; want 2 holds", info, err)
	}
	_ = again.Unlock(ctx)
}
