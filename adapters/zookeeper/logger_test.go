package zookeeper_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance/faultproxy"
	"github.com/locker-go/locker/internal/testenv"
)

// WithLogger reaches the driver: a connection dropped and made again
// within the session is logged (Info), and so is, at Warn, a partition
// that gives the session's locks up and the session's expiry behind it.
func TestLogsSessionEvents(t *testing.T) {
	t.Parallel()
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	p, err := faultproxy.New(strings.Split(u.Host, ",")[0])
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const s = 2 * time.Second
	pu := *u
	pu.Host, pu.RawQuery = p.Addr(), "session_timeout="+s.String()
	lg, logs := testenv.NewLogs()
	ctx := context.Background()
	l, err := locker.Open(ctx, pu.String(), locker.WithLogger(lg))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := uniq(t) + "k"

	// Dropped while no lock (so no watch) is held: go-zookeeper restores
	// watches on a new connection with a read that races its receive loop
	// (go-zookeeper/zk PR 35, unmerged), which the race detector reports.
	p.Drop()
	logs.Wait(t, 10*time.Second, slog.LevelInfo, "connection lost")
	logs.Wait(t, 10*time.Second, slog.LevelInfo, "connected again")

	held, err := l.TryLock(ctx, key, locker.WithTTL(s))
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	logs.Wait(t, 10*time.Second, slog.LevelWarn, "given up as lost")
	<-held.Done()
	// The server expires the session, deleting its nodes; told so on
	// reconnecting, the driver logs the expiry.
	raw := rawConn(t, u)
	eventually(t, func() bool { return count(t, raw, root(u), key) == 0 })
	p.Resume()
	logs.Wait(t, 10*time.Second, slog.LevelWarn, "session expired")
}
