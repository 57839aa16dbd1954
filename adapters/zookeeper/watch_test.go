package zookeeper

import (
	"bytes"
	"context"
	"crypto/rand"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// signalTimeout bounds each wait for a Watch's signal.
const signalTimeout = 10 * time.Second

// watchPrefix is a prefix of keys no other test uses.
func watchPrefix(t *testing.T) string {
	return "zk-watch/" + strings.ToLower(rand.Text()[:8]) + "/" + t.Name() + "/"
}

// startWatch watches key in space through z, stopped when t ends.
func startWatch(t *testing.T, z *zLocker, space driver.Space, key string) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
	defer cancel()
	changed, stop, err := z.Watch(ctx, space, key)
	if err != nil {
		t.Fatalf("Watch(%v, %q): %v", space, key, err)
	}
	t.Cleanup(stop)
	return changed
}

// expectSignal waits for a signal on changed, which what should have sent.
func expectSignal(t *testing.T, changed <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-changed:
	case <-time.After(signalTimeout):
		t.Fatalf("no signal within %v after %s", signalTimeout, what)
	}
}

// barrier returns once z's primary session has a reply to a request sent
// now: the server sends a session's watch events before its replies to
// later requests, so every event that the writes before the call fired
// on z's watches has reached the connection.
func barrier(t *testing.T, z *zLocker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
	defer cancel()
	if err := z.primary.sync(ctx, z.cfg.root); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if _, err := ask(ctx, z.primary, func() (bool, error) {
		ok, _, err := z.primary.conn.Exists(z.cfg.root)
		return ok, err
	}); err != nil {
		t.Fatalf("exists: %v", err)
	}
}

// lockUnlock takes key through l and releases it.
func lockUnlock(t *testing.T, l locker.Locker, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
	defer cancel()
	lease, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatalf("Lock(%q): %v", key, err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock(%q): %v", key, err)
	}
}

// A Watch on a key never locked (no key node yet) hears another Locker's
// Lock (the node appears), its Unlock, and a second Lock.
func TestWatchNewKey(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	w, other := openZ(t, u), openZ(t, u)
	key := watchPrefix(t) + "k"
	changed := startWatch(t, w, driver.Plain, key)
	ctx, cancel := context.WithTimeout(context.Background(), 3*signalTimeout)
	defer cancel()

	first, err := other.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	expectSignal(t, changed, "the first Lock of the key (its key node made)")
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	expectSignal(t, changed, "the Unlock")
	second, err := other.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Unlock(context.Background())
	expectSignal(t, changed, "the second Lock")
}

// A Watch on key "a" hears nothing of key "ab", whose key node's name
// has a's as prefix: while a's node does not exist (an exists-watch) and
// while it does (a children watch). A change of "a" is the control that
// signals do arrive.
func TestWatchNotPrefix(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	w, other := openZ(t, u), openZ(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), 2*signalTimeout)
	defer cancel()
	p := watchPrefix(t)

	a := p + "a" // never locked
	changed := startWatch(t, w, driver.Plain, a)
	quiet(t, w, changed, "setting the watch on "+a)
	lockUnlock(t, other.Locker, a+"b")
	quiet(t, w, changed, "Lock and Unlock of "+a+"b")
	lease, err := other.Lock(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Unlock(context.Background())
	expectSignal(t, changed, "the Lock of "+a)

	held := p + "held" // held before the watch
	lease, err = other.Lock(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	changed = startWatch(t, w, driver.Plain, held)
	quiet(t, w, changed, "setting the watch on "+held)
	lockUnlock(t, other.Locker, held+"b")
	quiet(t, w, changed, "Lock and Unlock of "+held+"b")
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	expectSignal(t, changed, "the Unlock of "+held)
}

// quiet fails t if changed has a signal, what having sent none: once any
// event that the writes before it fired has reached w's connection
// (barrier), it waits out the watch's round trip to set itself again.
func quiet(t *testing.T, w *zLocker, changed <-chan struct{}, what string) {
	t.Helper()
	barrier(t, w)
	select {
	case <-changed:
		t.Fatalf("a signal after %s", what)
	case <-time.After(200 * time.Millisecond):
	}
}

// A Watch on an election's node (Subtree, the name and '/') hears its
// leader's Campaign and resignation.
func TestWatchElection(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	w, other := openZ(t, u), openZ(t, u)
	name := watchPrefix(t) + "e"
	changed := startWatch(t, w, driver.Subtree, name+"/")
	ctx, cancel := context.WithTimeout(context.Background(), 2*signalTimeout)
	defer cancel()

	lease, err := locker.Campaign(ctx, other.Locker, name)
	if err != nil {
		t.Fatal(err)
	}
	expectSignal(t, changed, "Campaign")
	info, err := w.Status(ctx, driver.Subtree, name+"/")
	if err != nil || info.Fence != lease.Fence() {
		t.Errorf("Status of the election's node = %+v, %v; want fence %d", info, err, lease.Fence())
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	expectSignal(t, changed, "the leader's Unlock")
}

// watchGoroutines counts the goroutines that run a Watch or its calls.
func watchGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("(*keyWatch)")) || bytes.Contains(g, []byte("(*zkDriver).Watch")) {
			count++
		}
	}
	return count
}

// stop ends a Watch's goroutine, after it has served a few events.
func TestWatchStopLeavesNoGoroutine(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	w, other := openZ(t, u), openZ(t, u)
	key := watchPrefix(t) + "k"
	before := watchGoroutines()
	ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
	defer cancel()
	changed, stop, err := w.Watch(ctx, driver.Plain, key)
	if err != nil {
		t.Fatal(err)
	}
	if n := watchGoroutines(); n <= before {
		t.Fatalf("%d Watch goroutines while watching, %d before: the count sees none", n, before)
	}
	lockUnlock(t, other.Locker, key)
	expectSignal(t, changed, "Lock and Unlock")
	stop()
	stop() // again: a no-op
	timeout := time.After(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond) // no notification: poll
	defer tick.Stop()
	for n := watchGoroutines(); n > before; n = watchGoroutines() {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("%d Watch goroutines 5s after stop, %d before Watch", n, before)
		}
	}
}

// The watch a stopped Watch leaves set (a ZooKeeper watch cannot be
// removed) is parked, one per key node, and the next Watch of the key
// takes it over, live: Watch and stop again and again leave one.
func TestWatchAgainAfterStop(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	w, other := openZ(t, u), openZ(t, u)
	key := watchPrefix(t) + "k"
	path := w.parent(driver.Plain, key)
	parked := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		_, ok := w.parked[path]
		return ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
	defer cancel()
	for i := range 3 {
		_, stop, err := w.Watch(ctx, driver.Plain, key)
		if err != nil {
			t.Fatal(err)
		}
		if parked() {
			t.Errorf("Watch %d left the parked watch parked", i)
		}
		stop()
		if !parked() {
			t.Fatalf("stop %d parked no watch", i)
		}
	}
	changed := startWatch(t, w, driver.Plain, key) // takes over the first Watch's
	lockUnlock(t, other.Locker, key)
	expectSignal(t, changed, "Lock and Unlock, through a watch taken over")
}

// After the session expired (go-zookeeper ends each watch with
// EventNotWatching), run sets the watch again on the connection's session
// and signals once, and the new watch hears the next change. The expiry
// is faked: dropping a connection that holds watches races in
// go-zookeeper v1.0.4 (they are set again on the new one).
func TestWatchRearmsAfterExpiry(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	w, other := openZ(t, u), openZ(t, u)
	key := watchPrefix(t) + "k"
	kw := &keyWatch{s: w.primary, path: w.parent(driver.Plain, key), changed: make(chan struct{}, 1)}
	expired := make(chan zk.Event, 1)
	expired <- zk.Event{Type: zk.EventNotWatching, State: zk.StateDisconnected, Path: kw.path, Err: zk.ErrSessionExpired}
	close(expired)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		kw.run(ctx, expired)
	}()
	defer func() {
		cancel()
		<-done
	}()
	expectSignal(t, kw.changed, "the watch ended by the session's expiry")
	lockUnlock(t, other.Locker, key)
	expectSignal(t, kw.changed, "Lock and Unlock, through the watch set again")
}
