package testenv

import (
	"testing"
	"time"
)

// Signalled waits up to 5 s for a signal on c (a driver.Watcher's, say),
// and fails t, naming what should have sent one, if none comes.
func Signalled(t testing.TB, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatalf("no signal within 5s of %s", what)
	}
}
