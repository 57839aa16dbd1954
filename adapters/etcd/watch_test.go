package etcd

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// watchWait bounds the wait for a signal that must come.
const watchWait = 10 * time.Second

// watchKeys is a key prefix of t's own.
func watchKeys(t *testing.T) string {
	return "watch-" + strings.ReplaceAll(t.Name(), "/", "_") + "-" + time.Now().Format("150405.000000") + "/"
}

// startWatch watches key on d; the watch stops when t ends.
func startWatch(t *testing.T, d *etcdDriver, space driver.Space, key string) <-chan struct{} {
	t.Helper()
	ch, stop, err := d.Watch(t.Context(), space, key)
	if err != nil {
		t.Fatalf("Watch(%q): %v", key, err)
	}
	t.Cleanup(stop)
	return ch
}

// waitSignal fails t unless ch signals within watchWait.
func waitSignal(t *testing.T, ch <-chan struct{}, after string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(watchWait):
		t.Fatalf("no signal within %v after %s", watchWait, after)
	}
}

// queueLen is how many entries key's queue holds.
func queueLen(t *testing.T, d *etcdDriver, c *clientv3.Client, key string) int64 {
	t.Helper()
	resp, err := c.Get(t.Context(), d.queue(driver.Plain, key), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// A Watch signals another Locker's grant of the key, its release, and the
// end of a holder that nobody released: one whose Locker let its lease
// lapse (keep-alive off), and one whose process is gone (its client
// closed), which etcd's lease expiry deletes.
func TestWatchSignalsGrantReleaseAndExpiry(t *testing.T) {
	_, d, c := testLocker(t)
	other, _, _ := testLocker(t)
	ctx, key := t.Context(), watchKeys(t)+"k"
	ch := startWatch(t, d, driver.Plain, key)

	lease, err := other.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "another Locker's Lock")
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "its Unlock")

	// Each holder below writes one entry, and nothing touches it until it
	// ends: the signal after the grant's is that end.
	if _, err := other.Lock(ctx, key, locker.WithKeepAlive(false), locker.WithTTL(time.Second)); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "a Lock with keep-alive off")
	waitSignal(t, ch, "that lease's TTL (1s) ran out")
	if n := queueLen(t, d, c, key); n != 0 {
		t.Fatalf("signalled with %d entries left after the lease lapsed", n)
	}

	gone := crashingLocker(t, d.prefix)
	if _, err := gone.l.Lock(ctx, key, locker.WithTTL(time.Second)); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "a Lock of a Locker about to crash")
	gone.crash()
	waitSignal(t, ch, "the crashed holder's etcd lease expired")
	if n := queueLen(t, d, c, key); n != 0 {
		t.Fatalf("signalled with %d entries left after the etcd lease expired", n)
	}
}

// crasher is a Locker whose client can be closed under it, as if its
// process died: its entries go with its etcd lease's expiry.
type crasher struct {
	l locker.Locker
	c *clientv3.Client
}

func crashingLocker(t *testing.T, prefix string) crasher {
	u := testenv.URL(t, "LOCKER_TEST_ETCD")
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{strings.Split(u.Host, ",")[0]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDriver(c, WithPrefix(prefix), WithRequestTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l := locker.New(d)
	t.Cleanup(func() { c.Close(); l.Close() })
	return crasher{l: l, c: c}
}

// crash cuts the Locker from etcd: no keep-alive, no release.
func (cr crasher) crash() { cr.c.Close() }

// A Watch of key "a" hears nothing of key "ab", whose queue's name begins
// with "a" too. A watch of "ab" on the same client is the control: once it
// has heard "ab"'s Lock and Unlock, so has this client; "a"'s watch, which
// would have heard them before, has nothing pending, and hears "a"'s Lock.
func TestWatchHearsNoOtherKey(t *testing.T) {
	_, d, c := testLocker(t)
	other, _, _ := testLocker(t)
	ctx, base := t.Context(), watchKeys(t)
	a, ab := base+"a", base+"ab"
	wa := startWatch(t, d, driver.Plain, a)
	wab := startWatch(t, d, driver.Plain, ab)

	lease, err := other.Lock(ctx, ab)
	if err != nil {
		t.Fatal(err)
	}
	waitSignal(t, wab, "the Lock of "+ab)
	if n := queueLen(t, d, c, a); n != 0 { // the very range Watch(a) watches
		t.Errorf("%q's queue holds %d entries while only %q is held", a, n, ab)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, wab, "the Unlock of "+ab)
	// Both watches' events come in one stream, in revision order; this
	// bounds only the last hop, to the watch's goroutine, of a signal that
	// must not come.
	select {
	case <-wa:
		t.Fatalf("the watch of %q signalled after the Lock and Unlock of %q", a, ab)
	case <-time.After(200 * time.Millisecond):
	}

	lease, err = other.Lock(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	waitSignal(t, wa, "the Lock of "+a)
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, wa, "the Unlock of "+a)
}

// The prefix a Watch watches holds the entries of its key in its space
// and nothing else of the driver's: not the queue of a key it begins (or
// that begins it), of the same key in the other space, nor a fence
// offset.
func TestWatchPrefixIsTheKeysAlone(t *testing.T) {
	d, err := newDriver(&clientv3.Client{}, WithPrefix("/p/"))
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "ab", "a/", "a/b", "ab/", "a%", "a%2F", "%Ta", "%Fa", "T", "F"}
	spaces := []driver.Space{driver.Plain, driver.Subtree}
	for _, s := range spaces {
		for _, k := range keys {
			watched := d.queueWatch(s, k).prefix
			for _, s2 := range spaces {
				for _, k2 := range keys {
					entry := d.queue(s2, k2) + "ABCDEF"
					if same := s == s2 && k == k2; strings.HasPrefix(entry, watched) != same {
						t.Errorf("the watch of %q (space %d), %q, covers the entry %q of %q (space %d): %v",
							k, s, watched, entry, k2, s2, !same)
					}
					if fk := d.floorKey(s2, k2); strings.HasPrefix(fk, watched) {
						t.Errorf("the watch of %q (space %d) covers the offset %q", k, s, fk)
					}
				}
			}
		}
	}
}

// A watch that breaks (its channel closed, or canceled as a compaction
// does) is set up again, signals once it is, and hears what follows.
func TestWatchRebuildsABrokenWatch(t *testing.T) {
	for name, broken := range map[string]func() clientv3.WatchChan{
		"closed": func() clientv3.WatchChan {
			ch := make(chan clientv3.WatchResponse)
			close(ch)
			return ch
		},
		"compacted": func() clientv3.WatchChan {
			ch := make(chan clientv3.WatchResponse, 1)
			ch <- clientv3.WatchResponse{Canceled: true, CompactRevision: 1}
			return ch
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, d, _ := testLocker(t)
			other, _, _ := testLocker(t)
			ctx, key := t.Context(), watchKeys(t)+"k"
			w := d.queueWatch(driver.Plain, key)
			life, end := context.WithCancel(d.ctx)
			stop := w.start(life, end, broken(), func() {})
			defer stop()
			waitSignal(t, w.changed, "the watch broke")
			lease, err := other.Lock(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			waitSignal(t, w.changed, "a Lock after the watch was set up again")
			if err := lease.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			waitSignal(t, w.changed, "an Unlock after the watch was set up again")
		})
	}
}

// stop ends the watch's goroutine and its etcd watch: the goroutines fall
// back to their number before Watch. (The watch stream is the driver's,
// kept open from its first watch until Close: a first watch, stopped,
// starts it before the count.)
func TestWatchStopLeavesNoGoroutine(t *testing.T) {
	_, d, c := testLocker(t)
	other, _, _ := testLocker(t)
	ctx, key := t.Context(), watchKeys(t)+"k"
	// Warm up: both clients connected, the other Locker's lease granted.
	lease, err := other.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	queueLen(t, d, c, key)
	_, stopFirst, err := d.Watch(ctx, driver.Plain, key)
	if err != nil {
		t.Fatal(err)
	}
	stopFirst()
	before := runtime.NumGoroutine()

	ch, stop, err := d.Watch(ctx, driver.Plain, key)
	if err != nil {
		t.Fatal(err)
	}
	if lease, err = other.Lock(ctx, key); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "a Lock")
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "an Unlock")
	stop()
	stop() // a second stop is harmless
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines 5s after stop, %d before Watch:\n%s",
				runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
