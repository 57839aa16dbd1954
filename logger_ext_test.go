package locker_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locker-go/locker"
)

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// Open's WithLogger reaches the Locker, also through a migrate: URL's two
// sides: a lease lost to ForceUnlock is logged with its key.
func TestOpenWithLogger(t *testing.T) {
	ctx := context.Background()
	for _, url := range []string{"mem://" + t.Name(), "migrate:?from=mem://" + t.Name() + "-a&to=mem://" + t.Name() + "-b"} {
		var out syncBuffer
		l, err := locker.Open(ctx, url, locker.WithLogger(slog.New(slog.NewTextHandler(&out, nil))))
		if err != nil {
			t.Fatal(err)
		}
		lease, err := l.Lock(ctx, "reports/daily", locker.WithTTL(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		side := url
		if strings.HasPrefix(url, "migrate:") {
			side = "mem://" + t.Name() + "-a"
		}
		admin, err := locker.Open(ctx, side)
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.(locker.Admin).ForceUnlock(ctx, "reports/daily"); err != nil {
			t.Fatal(err)
		}
		<-lease.Done()
		if got := out.String(); !strings.Contains(got, "lease lost") || !strings.Contains(got, "reports/daily") {
			t.Errorf("%s: log %q; want the lost lease", url, got)
		}
		admin.Close()
		l.Close()
	}
}
