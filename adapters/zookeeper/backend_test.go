package zookeeper_test

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
	"github.com/locker-go/locker/adapters/zookeeper"
	"github.com/locker-go/locker/internal/testenv"
)

func open(t *testing.T, u *url.URL) locker.Locker {
	t.Helper()
	l, err := locker.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func uniq(t *testing.T) string {
	return "zk-" + strings.ToLower(rand.Text()[:8]) + "/" + t.Name() + "/"
}

// Keys ZooKeeper would refuse as names, or read as paths, lock and list
// like any other.
func TestOddKeys(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	a, b := open(t, u), open(t, u)
	p := uniq(t)
	keys := []string{p + ".", p + "..", p + "😀", p + "a\x01b", p + "\uffff", p + "\ud7ff", p + "a/../b", p + "%2F"}
	for _, k := range keys {
		l, err := a.TryLock(context.Background(), k)
		if err != nil {
			t.Fatalf("TryLock(%q): %v", k, err)
		}
		defer l.Unlock(context.Background())
		if _, err := b.TryLock(context.Background(), k); !errors.Is(err, locker.ErrLocked) {
			t.Errorf("TryLock(%q) by another client = %v, want ErrLocked", k, err)
		}
	}
	list, err := b.(locker.Admin).List(context.Background(), p)
	if err != nil || len(list) != len(keys) {
		t.Fatalf("List = %v, %v; want %d locks", list, err, len(keys))
	}
	for _, info := range list {
		if !strings.HasPrefix(info.Key, p) || info.Waiters != 0 {
			t.Errorf("List entry %+v", info)
		}
	}
}

// A Locker pinned to one session (session_timeout) refuses a TTL below
// that session's timeout before anything is created, and says what to do;
// a default Locker takes the same TTL.
func TestTTLBelowSessionTimeout(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	pu := *u
	pu.RawQuery = "session_timeout=10s"
	l := open(t, &pu)
	key := uniq(t) + "k"
	_, err := l.TryLock(context.Background(), key, locker.WithTTL(5*time.Second))
	if !errors.Is(err, locker.ErrInvalidTTL) {
		t.Errorf("TryLock with TTL 5s < session timeout 10s = %v, want ErrInvalidTTL", err)
	}
	for _, fix := range []string{"WithTTL(10s)", "without session_timeout", "session_timeout=5s", "WithSessionTimeout(5s)"} {
		if err != nil && !strings.Contains(err.Error(), fix) { // the error says what to do
			t.Errorf("error %q does not suggest %s", err, fix)
		}
	}
	if n := count(t, rawConn(t, u), root(u), key); n != 0 {
		t.Errorf("refused TryLock left %d nodes", n)
	}
	held, err := open(t, u).TryLock(context.Background(), key, locker.WithTTL(5*time.Second))
	if err != nil {
		t.Fatalf("TryLock with TTL 5s through a default Locker = %v", err)
	}
	_ = held.Unlock(context.Background())
}

// Cut off from the server, a holder reports its lease lost before the
// server can hand the key on, and the key then passes on.
func TestSessionLoss(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	p, pu := proxied(t, u)
	a, b := open(t, pu), open(t, u)
	key := uniq(t) + "k"
	held, err := a.TryLock(context.Background(), key, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	go func() { // queued behind the holder before the cut
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		next, err := b.Lock(ctx, key)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- time.Now()
		if next.Fence() <= held.Fence() {
			t.Errorf("fence %d not above %d", next.Fence(), held.Fence())
		}
		_ = next.Unlock(context.Background())
	}()
	eventually(t, func() bool { return count(t, rawConn(t, u), root(u), key) == 2 })
	p.Cut()
	var lostAt time.Time
	select {
	case <-held.Done():
		lostAt = time.Now()
	case <-time.After(10 * time.Second):
		t.Fatal("lease not reported lost after the connection was cut")
	}
	if !errors.Is(held.Err(), locker.ErrLeaseLost) {
		t.Errorf("Err = %v, want ErrLeaseLost", held.Err())
	}
	at, ok := <-got
	if ok && !lostAt.Before(at) {
		t.Errorf("the next owner got the key %v before the cut-off holder saw its lease lost", lostAt.Sub(at))
	}
}

// eventually polls a server state that sends no notification.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("condition not met within 5s")
		}
	}
}

// The key's node is reaped once free (a container node), and the fence
// still grows when it is made again.
func TestFenceAcrossReapedParent(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	l, raw := open(t, u), rawConn(t, u)
	key := uniq(t) + "k"
	first, err := l.TryLock(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	parent := root(u) + "/" + zookeeper.Escape(key)
	end := time.Now().Add(15 * time.Second)
	for { // the server reaps on its own schedule and tells nobody
		ok, _, err := raw.Exists(parent)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%s still exists 15s after its last lock was released", parent)
		}
		time.Sleep(20 * time.Millisecond)
	}
	second, err := l.TryLock(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if second.Fence() <= first.Fence() {
		t.Errorf("fence %d after the key's node was re-made is not above %d", second.Fence(), first.Fence())
	}
	_ = second.Unlock(context.Background())
}

// With user:pass the nodes carry a digest ACL: an unauthenticated client
// cannot delete (release) them.
func TestDigestAuth(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	au := *u
	au.User = url.UserPassword("locker-test", "s3cret")
	au.Path = "/locker-digest-test"
	l := open(t, &au)
	key := uniq(t) + "k"
	held, err := l.TryLock(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(context.Background())
	raw := rawConn(t, u)
	parent := au.Path + "/" + zookeeper.Escape(key)
	children, _, err := raw.Children(parent)
	if err == nil && len(children) == 1 {
		err = raw.Delete(parent+"/"+children[0], -1)
	}
	if !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("unauthenticated list or delete of a digest-protected lock = %v, want zk.ErrNoAuth", err)
	}
	if held.Err() != nil {
		t.Errorf("lease Err = %v", held.Err())
	}
}

// New uses a connection the caller made and leaves it open on Close.
func TestNewWithConn(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	conn := rawConn(t, u)
	l, err := zookeeper.New(conn, zookeeper.WithRoot(root(u)), zookeeper.WithSessionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	held, err := l.Lock(context.Background(), uniq(t)+"k")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(held.Err(), locker.ErrNotHeld) {
		t.Errorf("lease Err after Close = %v, want ErrNotHeld (released)", held.Err())
	}
	if _, _, err := conn.Exists("/"); err != nil {
		t.Errorf("connection unusable after the Locker's Close: %v", err)
	}
	if _, err := zookeeper.New(conn, zookeeper.WithRoot("relative")); err == nil {
		t.Error("New accepted a relative root")
	}
}
