package locker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locker-go/locker/driver"
)

// logBuffer is a slog handler's output, safe for the lease's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *logBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *logBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// failingHold's renewals fail with err until gone, then answer ErrNotHeld.
type failingHold struct {
	mu   sync.Mutex
	fail int
}

func (h *failingHold) Refresh(context.Context) (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail > 0 {
		h.fail--
		return 0, errors.New("connection reset")
	}
	return 0, ErrNotHeld
}
func (h *failingHold) Release(context.Context) error { return nil }

// With a logger, a failed renewal is logged at Info as retried, and the
// lease's loss at Warn with its key and why, before Done closes; without
// one, nothing is.
func TestLeaseLogsItsRareEvents(t *testing.T) {
	var out logBuffer
	set := newLeaseSet()
	set.log = slog.New(slog.NewTextHandler(&out, nil))
	l, err := newLease(set, leaseConfig{Key: "jobs/7", Fence: 42, TTL: 300 * time.Millisecond, KeepAlive: true,
		Start: time.Now(), Hold: &failingHold{fail: 1}})
	if err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	got := out.String()
	for _, want := range []string{"level=INFO", "renewal failed; retrying", "connection reset",
		"level=WARN", "lease lost", "key=jobs/7", "fence=42", "a renewal found its hold gone"} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %q", got, want)
		}
	}

	quiet, err := newLease(newLeaseSet(), leaseConfig{Key: "jobs/8", TTL: 300 * time.Millisecond, KeepAlive: true,
		Start: time.Now(), Hold: &failingHold{fail: 1}})
	if err != nil {
		t.Fatal(err)
	}
	<-quiet.Done() // no logger: nothing to write to, and nothing fails
}

// A lease whose renewals hang ends at its deadline, logged as such.
func TestLeaseLogsItsDeadline(t *testing.T) {
	var out logBuffer
	set := newLeaseSet()
	set.log = slog.New(slog.NewTextHandler(&out, nil))
	h := &ctxHold{called: make(chan struct{})}
	l, err := newLease(set, leaseConfig{Key: "k", TTL: 300 * time.Millisecond, KeepAlive: true, Start: time.Now(), Hold: h})
	if err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	if got := out.String(); !strings.Contains(got, "its deadline passed without a renewal") {
		t.Errorf("log %q; want the deadline named", got)
	}
}

// loggedDriver is a driver that logs its own events (driver.Logged).
type loggedDriver struct {
	*batchDriver
	driver.Log
}

// New's WithLogger reaches a driver.Logged: what the driver logs goes to
// the Locker's logger; without one it goes nowhere.
func TestNewGivesTheDriverItsLogger(t *testing.T) {
	var out logBuffer
	d := &loggedDriver{batchDriver: &batchDriver{}}
	l := New(d, WithLogger(slog.New(slog.NewTextHandler(&out, nil))))
	defer l.Close()
	d.Warn("locker/test: a server went away", "server", "s1")
	if got := out.String(); !strings.Contains(got, "a server went away") || !strings.Contains(got, "server=s1") {
		t.Errorf("the driver's record: %q; want it logged", got)
	}
	silent := &loggedDriver{batchDriver: &batchDriver{}}
	defer New(silent).Close()
	silent.Warn("nobody hears this") // no logger: no panic, nothing logged
}
