package zookeeper_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/adapters/zookeeper"
	"github.com/locker-go/locker/internal/testenv"
)

// countedConn counts the packets a connection writes: go-zookeeper writes
// each request (and ping) in one Write.
type countedConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countedConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// A Lock of a key nobody else holds or waits for sends one request, the
// multi that makes its node (alone.go), where making the node and then
// listing the queue took four; the watch on its node waits for armDelay,
// by when this test's holds have ended (a watch set at once is sent while
// the test reads the node); the Unlock sends the delete. The fewest of
// three is counted, a ping or a probe of the session's falling into one
// now and then.
func TestLockAloneInOneRequest(t *testing.T) {
	t.Parallel()
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	var writes atomic.Int64
	dial := func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		return countedConn{c, &writes}, err
	}
	conn := rawConnDialing(t, u, dial)
	l, err := zookeeper.New(conn, zookeeper.WithRoot(root(u)), zookeeper.WithSessionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	key := uniq(t) + "k"
	raw := rawConn(t, u)
	fewest := int64(-1)
	for i := range 3 {
		before := writes.Load()
		held, err := l.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		// The fence is the node's czxid, as with a listing's read.
		children, _, err := raw.Children(root(u) + "/" + zookeeper.Escape(key))
		if err != nil || len(children) != 1 {
			t.Fatalf("the key's queue: %v, %v; want our node alone", children, err)
		}
		_, st, err := raw.Exists(root(u) + "/" + zookeeper.Escape(key) + "/" + children[0])
		if err != nil {
			t.Fatal(err)
		}
		if held.Fence() != uint64(st.Czxid) {
			t.Errorf("fence %d, want the node's czxid %d", held.Fence(), st.Czxid)
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		n := writes.Load() - before
		if i > 0 && (fewest < 0 || n < fewest) { // the first also makes the key's node
			fewest = n
		}
	}
	if fewest > 2 {
		t.Errorf("a Lock and Unlock of a free key wrote %d packets at the fewest, want 2 (the multi, the delete)", fewest)
	}
}

// Where the multi is refused for want of rights on the root (its offset
// node is made and deleted there), Locks make their nodes with a plain
// create from then on, and say so once.
func TestLockWithoutTheMulti(t *testing.T) {
	t.Parallel()
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	raw := rawConn(t, u)
	r := "/locker-nodelete-" + strings.ToLower(uniq(t)[3:11])
	noDelete := zk.WorldACL(zk.PermAll &^ zk.PermDelete)
	if _, err := raw.Create(r, nil, 0, noDelete); err != nil {
		t.Fatal(err)
	}
	ru := *u
	ru.Path = r
	lg, logs := testenv.NewLogs()
	ctx := context.Background()
	l, err := locker.Open(ctx, ru.String(), locker.WithLogger(lg))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var last uint64
	for _, key := range []string{"a", "b", "a"} {
		held, err := l.Lock(ctx, key)
		if err != nil {
			t.Fatalf("Lock(%q) under a root that refuses deletes: %v", key, err)
		}
		if held.Fence() <= last {
			t.Errorf("fence %d after %d", held.Fence(), last)
		}
		last = held.Fence()
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	logs.Wait(t, 10*time.Second, slog.LevelInfo, "plain create from now on")
	if n := logs.Count(slog.LevelInfo, "plain create from now on"); n != 1 {
		t.Errorf("the multi's refusal logged %d times, want once", n)
	}
}

// deleteTree deletes path and every node below it.
func deleteTree(t *testing.T, conn *zk.Conn, path string) {
	t.Helper()
	children, _, err := conn.Children(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range children {
		deleteTree(t, conn, path+"/"+c)
	}
	if err := conn.Delete(path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
}

// A Locker whose root went (a server that came back empty, an operator's
// clean-up) makes it again at its next Lock: the multi fails for want of
// the root (its offset node's parent), and the node is made once the
// root and the key's node are.
func TestLockAfterTheRootWent(t *testing.T) {
	t.Parallel()
	u := testenv.URL(t, "LOCKER_TEST_ZK")
	ru := *u
	ru.Path = "/locker-gone-" + strings.ToLower(uniq(t)[3:11])
	l, raw := open(t, &ru), rawConn(t, u)
	ctx := context.Background()
	first, err := l.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	deleteTree(t, raw, ru.Path)
	second, err := l.Lock(ctx, "k")
	if err != nil {
		t.Fatalf("Lock after the root went: %v", err)
	}
	if second.Fence() <= first.Fence() {
		t.Errorf("fence %d after the root was made again, not above %d", second.Fence(), first.Fence())
	}
	children, _, err := raw.Children(ru.Path + "/" + zookeeper.Escape("k"))
	if err != nil || len(children) != 1 {
		t.Errorf("the key's queue after the Lock: %v, %v; want its node alone", children, err)
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
