package history

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locker-go/locker"
	_ "github.com/locker-go/locker/adapters/mem"
)

// op appends one operation by hand, for the model's own tests.
func (r *Recorder) op(client int, k kind, lease int, call, ret int64, res result, fence uint64) {
	r.add(client, input{kind: k, key: "k", lease: lease}, call, output{result: res, fence: fence}, ret)
}

func TestModel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(r *Recorder)
		legal bool
	}{
		{"handoff", func(r *Recorder) {
			r.op(0, acquire, 1, 0, 10, ok, 1)
			r.op(0, release, 1, 20, 30, ok, 0)
			r.op(1, acquire, 2, 5, 40, ok, 2) // waited, granted after the release
		}, true},
		{"two holders at once", func(r *Recorder) {
			r.op(0, acquire, 1, 0, 10, ok, 1)
			r.op(1, acquire, 2, 11, 12, ok, 2)
			r.op(0, release, 1, 20, 30, ok, 0)
		}, false},
		{"fence not rising", func(r *Recorder) {
			r.op(0, acquire, 1, 0, 10, ok, 5)
			r.op(0, release, 1, 20, 30, ok, 0)
			r.op(1, acquire, 2, 31, 40, ok, 5)
		}, false},
		{"expired, then taken", func(r *Recorder) {
			r.op(0, acquire, 1, 0, 10, ok, 1)
			r.op(0, end, 1, 50, 1000, ok, 0) // its Deadline: 50
			r.op(1, acquire, 2, 20, 60, ok, 2)
			r.op(0, release, 1, 70, 80, notHeld, 0)
		}, true},
		{"taken before the holder's Deadline", func(r *Recorder) {
			r.op(0, acquire, 1, 0, 10, ok, 1)
			r.op(0, end, 1, 50, 1000, ok, 0)
			r.op(1, acquire, 2, 20, 40, ok, 2)
		}, false},
		{"release by one not holding", func(r *Recorder) {
			r.op(0, acquire, 1, 0, 10, ok, 1)
			r.op(1, release, 2, 20, 30, ok, 0)
		}, false},
		{"refusal of a free key", func(r *Recorder) {
			r.op(0, acquire, 1, 0, 10, ok, 1)
			r.op(0, release, 1, 20, 30, ok, 0)
			r.op(1, acquire, 0, 40, 50, refused, 0)
		}, false},
		{"refusal after an expired lease's late Unlock", func(r *Recorder) {
			r.op(0, acquire, 1, 0, 10, ok, 1)
			r.op(0, end, 1, 50, 1000, ok, 0)
			r.op(0, release, 1, 55, 56, notHeld, 0)
			r.op(1, acquire, 0, 60, 70, refused, 0) // the backend's copy outlives the Deadline
			r.op(1, acquire, 2, 80, 90, ok, 2)
		}, true},
		{"lower fence after an expired lease", func(r *Recorder) {
			r.op(0, acquire, 1, 0, 10, ok, 5)
			r.op(0, end, 1, 50, 1000, ok, 0)
			r.op(1, acquire, 2, 60, 70, ok, 4)
		}, false},
		{"refusal while another acquire is on its way", func(r *Recorder) {
			r.op(0, acquire, 1, 0, 10, ok, 1)
			r.op(0, release, 1, 20, 30, ok, 0)
			r.op(1, acquire, 0, 25, 50, refused, 0) // saw a queued place, given up
			r.op(2, acquire, 0, 35, 45, refused, 0)
		}, true},
		{"refusal after a failed acquire", func(r *Recorder) {
			r.op(1, failed, 0, 0, 10, other, 0) // its grant may have been lost
			r.op(1, acquire, 0, 40, 50, refused, 0)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New()
			tc.build(r)
			err := r.Check(t.Context())
			var v *Violation
			if tc.legal && err != nil || !tc.legal && !errors.As(err, &v) {
				t.Fatalf("Check = %v; want legal: %v", err, tc.legal)
			}
		})
	}
}

// A Lock whose ctx ended as it waited is recorded as a failed acquire, not
// a refusal: the driver drops what it may have left (a grant as it gave
// up) in the background, so a later refusal of the key is no violation.
func TestLockCutShortIsAFailedAcquire(t *testing.T) {
	ctx := t.Context()
	r := New()
	l := open(t, "mem://history-cut-"+t.Name())
	held, err := r.Client().Lock(ctx, l, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := r.Client().Lock(wctx, l, "k"); !errors.Is(err, locker.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock = %v, want ErrLocked and DeadlineExceeded", err)
	}
	r.mu.Lock()
	last := r.ops[len(r.ops)-1].Input.(input)
	r.mu.Unlock()
	if last.kind != failed {
		t.Fatalf("the cut-short Lock recorded as %s, want %s", kindNames[last.kind], kindNames[failed])
	}
}

// Two clients that each hold the key in a lock space of their own, as two
// processes pointed at different servers would: the history shows the
// overlap, and its visualization can be written.
func TestViolationFound(t *testing.T) {
	ctx := t.Context()
	r := New()
	a, b := open(t, "mem://history-a"), open(t, "mem://history-b")
	la, err := r.Client().Lock(ctx, a, "k")
	if err != nil {
		t.Fatal(err)
	}
	lb, err := r.Client().Lock(ctx, b, "k")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []locker.Lease{la, lb} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var v *Violation
	if err := r.Check(ctx); !errors.As(err, &v) {
		t.Fatalf("Check = %v; want a *Violation", err)
	}
	path := filepath.Join(t.TempDir(), "history.html")
	if err := v.WriteHTML(path); err != nil {
		t.Fatal(err)
	}
	if html, err := os.ReadFile(path); err != nil || !strings.Contains(string(html), "<html") {
		t.Fatalf("visualization: %v, %d bytes", err, len(html))
	}
}

// Clients of one lock space, on two keys, with every kind of call and
// leases that expire: the history is recorded and obeys the model.
func TestRecordedHistoryLegal(t *testing.T) {
	ctx := t.Context()
	r := New()
	var wg sync.WaitGroup
	for i := range 4 {
		l := open(t, "mem://history-legal")
		c := r.Client()
		wg.Go(func() {
			for j := range 20 {
				work(t, ctx, c, l, []string{"x", "y"}[j%2], i+j)
			}
		})
	}
	wg.Wait()
	if err := r.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Len() < 4*20 {
		t.Fatalf("%d operations recorded, want at least %d", r.Len(), 4*20)
	}
}

func work(t *testing.T, ctx context.Context, c *Client, l locker.Locker, key string, n int) {
	if n%5 == 0 { // a TryLock, often refused
		if lease, err := c.TryLock(ctx, l, key); err == nil {
			_ = lease.Unlock(ctx)
		} else if !errors.Is(err, locker.ErrLocked) {
			t.Error(err)
		}
		return
	}
	opts := []locker.Option{locker.WithTTL(time.Second)}
	if n%7 == 0 { // a lease left to expire
		opts = []locker.Option{locker.WithTTL(20 * time.Millisecond), locker.WithKeepAlive(false)}
	}
	lease, err := c.Lock(ctx, l, key, opts...)
	if err != nil {
		t.Error(err)
		return
	}
	if n%7 == 0 {
		<-lease.Done()
	} else if err := lease.Refresh(ctx); err != nil {
		t.Error(err)
	}
	if err := lease.Unlock(ctx); err != nil && !errors.Is(err, locker.ErrNotHeld) {
		t.Error(err)
	}
}

func open(t *testing.T, url string) locker.Locker {
	t.Helper()
	l, err := locker.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
