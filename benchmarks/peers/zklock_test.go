package peers

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
)

// zkLockClient is go-zookeeper's Lock recipe on its own session, as long as
// our TTL. Lock takes no context: a stuck Lock holds the benchmark up.
func zkLockClient(tb testing.TB, server string) locker.Locker {
	c := zkConn(tb, server)
	var parents sync.Map // lock parent nodes the recipe created
	return shim{
		lock: func(_ context.Context, key string) (func(context.Context) error, error) {
			path := zkRoot + "/" + url.PathEscape(key)
			parents.Store(path, true)
			l := zk.NewLock(c, path, zk.WorldACL(zk.PermAll))
			if err := l.Lock(); err != nil {
				return nil, err
			}
			return func(context.Context) error { return l.Unlock() }, nil
		},
		// The recipe leaves its persistent parent nodes behind; the last
		// client to close removes them (the others find children left).
		close: func() error {
			parents.Range(func(p, _ any) bool {
				_ = c.Delete(p.(string), -1)
				return true
			})
			return nil
		},
	}
}

// zkRoot holds the recipe's lock nodes.
const zkRoot = "/peers-bench"

// zkConn connects to server with a TTL-long session and waits for it; the
// connection closes when tb ends.
func zkConn(tb testing.TB, server string) *zk.Conn {
	c, events, err := zk.Connect([]string{server}, ttl, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				tb.Fatal("zookeeper: connection closed before a session was set up")
			}
			if ev.State == zk.StateHasSession {
				return c
			}
			if ev.Err != nil && !errors.Is(ev.Err, zk.ErrNoServer) {
				tb.Fatalf("zookeeper: %v", ev.Err)
			}
		case <-timeout:
			tb.Fatalf("zookeeper %s: no session within 30s", server)
		}
	}
}

// nopLogger silences go-zookeeper.
type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
