package zookeeper

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// silent is a go-zookeeper logger that says nothing.
type silent struct{}

func (silent) Printf(string, ...any) {}

// A waiter whose predecessor goes between its listing and its watch
// leaves no watch behind: ZooKeeper keeps an exists-watch set on a
// missing node until a node of its path is made, which for a sequential
// node's name is never, so each such race cost the session a watch for
// its life (one hand-off in a few hundred under contention). Here the
// predecessor's path is made again after the waiter was granted the key:
// a watch left on it would tell the waiter's session so.
func TestWatchOfAGoneNodeLeavesNone(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	holder := openZ(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created := make(chan string, 16)
	conn, events, err := zk.Connect(strings.Split(u.Host, ","), 10*time.Second, zk.WithLogger(silent{}), zk.WithLogInfo(false),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventNodeCreated {
				created <- ev.Path
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	waiter, err := New(conn, WithRoot(holder.cfg.root), WithSessionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()

	key := "gone-" + rand.Text()
	held, err := holder.Lock(ctx, key, locker.WithKeepAlive(false))
	if err != nil {
		t.Fatal(err)
	}
	var gone string // the predecessor's path, deleted before the watch
	hook := func(path string) {
		if gone == "" {
			gone = path
			if err := held.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}
	}
	testHookBeforeWatch.Store(&hook)
	lease, err := waiter.Lock(ctx, key)
	testHookBeforeWatch.Store(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Unlock(ctx)
	if gone == "" {
		t.Fatal("the waiter did not watch a predecessor")
	}
	raw := holder.primary.conn
	if _, err := raw.Create(gone, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if err := raw.Delete(gone, -1); err != nil {
		t.Fatal(err)
	}
	// The waiter's session hears a watch's event before the answer to a
	// read it sends after the write (ZooKeeper's order).
	if _, err := conn.Sync(gone); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-created:
		t.Errorf("a watch was left on the gone predecessor %s: its path's creation reached the waiter's session", p)
	default:
	}
}
