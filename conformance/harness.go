// Package conformance checks that a locker.Locker keeps the guarantees of
// the locker contract, against a real backend. Every adapter in this module
// runs it, and so can a third-party adapter:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{NewLocker: ..., Crash: ..., Count: ...})
//	}
//
// Subtests run in parallel on keys of their own, so one backend serves them all.
package conformance

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker"
)

// Harness is how the suite drives one backend.
type Harness struct {
	// NewLocker returns a new, independent client of the backend under
	// test: its own connection or session, like a separate process. The
	// suite closes it at the end of the test.
	NewLocker func(t testing.TB) locker.Locker
	// Crash makes l vanish as a killed process would: no unlock, no
	// goodbye to the backend, its keep-alive silenced (e.g. its connection
	// cut by internal/faultproxy). Its locks must then lapse by themselves.
	Crash func(t testing.TB, l locker.Locker)
	// Count returns how many per-key records the backend holds (keys,
	// nodes, rows: holders and queued waiters) for keys beginning with prefix.
	Count func(t testing.TB, prefix string) int
	// FIFO declares that waiters get a key in arrival order.
	FIFO bool
	// TTL is the short lease the expiry tests use (default 1s); session
	// backends set what their session timeout bounds allow.
	TTL time.Duration
	// RoundTrip makes one plain backend round trip (PING, SELECT 1, a Get).
	// Optional: benchmarks report lock+unlock as a multiple of it.
	RoundTrip func(ctx context.Context) error
}

func (h Harness) ttl() time.Duration {
	if h.TTL > 0 {
		return h.TTL
	}
	return time.Second
}

// slack is the grace the suite allows on top of a TTL for the backend and a
// loaded CI machine; it catches "never" and "after a poll interval", not
// milliseconds.
const slack = 3 * time.Second

// runID keeps keys of concurrent runs against one backend apart.
var runID = strings.ToLower(rand.Text()[:8])

// keyFor returns a key prefix unique to this test and run.
func keyFor(t testing.TB) string {
	return "conformance-" + runID + "/" + t.Name() + "/"
}

// client makes a Locker and closes it when the test ends.
func (h Harness) client(t testing.TB) locker.Locker {
	t.Helper()
	l := h.NewLocker(t)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// ctx is a context bounded well past anything a test should need, so a
// hang fails the test instead of the whole run.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func lock(t testing.TB, l locker.Locker, key string, opts ...locker.Option) locker.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := l.Lock(ctx, key, opts...)
	if err != nil {
		t.Fatalf("Lock(%q): %v", key, err)
	}
	return lease
}

func tryLock(t testing.TB, l locker.Locker, key string, opts ...locker.Option) locker.Lease {
	t.Helper()
	lease, err := l.TryLock(testCtx(t), key, opts...)
	if err != nil {
		t.Fatalf("TryLock(%q): %v", key, err)
	}
	return lease
}

func unlock(t testing.TB, lease locker.Lease) {
	t.Helper()
	if err := lease.Unlock(testCtx(t)); err != nil {
		t.Fatalf("Unlock(%q): %v", lease.Key(), err)
	}
}

// waitDone waits for the lease to end within d.
func waitDone(t testing.TB, lease locker.Lease, d time.Duration) {
	t.Helper()
	select {
	case <-lease.Done():
	case <-time.After(d):
		t.Fatalf("lease on %q still not done %v after its deadline %v", lease.Key(), d, lease.Deadline())
	}
}

// eventually polls cond, a check of backend state that offers no
// notification, until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
