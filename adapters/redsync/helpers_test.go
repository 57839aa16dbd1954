package redsync

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// uniqueKey is a key no other test, here or in another package, uses.
func uniqueKey(t testing.TB, name string) string {
	return fmt.Sprintf("review/%s/%s/%d", t.Name(), name, time.Now().UnixNano())
}

// testLocker is a Locker and the driver under it, for tests that look
// inside. Close is ambiguous between the two: call it on Locker.
type testLocker struct {
	locker.Locker
	*redlock
}

// newTestLocker is New, keeping hold of the driver.
func newTestLocker(clients []goredis.UniversalClient, opts ...Option) (*testLocker, error) {
	d, err := newDriver(clients, opts...)
	if err != nil {
		return nil, err
	}
	return &testLocker{d.locker(), d}, nil
}

// plainLocker is a Locker over the shared masters, dialled directly, and
// the raw clients it uses.
func plainLocker(t testing.TB) (*testLocker, []goredis.UniversalClient) {
	t.Helper()
	addrs := masterAddrs(t)
	clients := make([]goredis.UniversalClient, len(addrs))
	for i, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	l, err := newTestLocker(clients, WithNodeTimeout(suiteNodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Locker.Close() })
	return l, clients
}

// masterRecord reads key's record on one master: the owner, holds and
// PTTL of its first S or X holder; owner is "" when there is none.
func masterRecord(t testing.TB, l *testLocker, c goredis.UniversalClient, key string) (owner string, holds int64, pttl time.Duration) {
	t.Helper()
	now := time.Now()
	v, err := statusScript.Run(context.Background(), c, l.adminKeys(name{driver.Plain, key})).Slice()
	if err != nil {
		t.Fatalf("status of %q: %v", key, err)
	}
	st := parseStatus(v, now)
	if len(st.holders) == 0 {
		return "", 0, 0
	}
	h := st.holders[0]
	return h.Owner, int64(h.Holds), h.Expires.Sub(now)
}

// commandHook is a goredis.Hook that lets dials and pipelines pass: embed
// it in a hook of single commands.
type commandHook struct{}

func (commandHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (commandHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// scriptCounter counts the scripts a client sent (whatever their outcome).
type scriptCounter struct {
	commandHook
	n atomic.Int64
}

func (s *scriptCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			s.n.Add(1)
		}
		return err
	}
}

// scriptsRun is how many scripts the server has run or refused so far.
func scriptsRun(t testing.TB, addr string) int64 {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats on %s: %v", addr, err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		_, fields, _ := strings.Cut(strings.TrimSpace(line), ":")
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			if k == "calls" || k == "rejected_calls" || k == "failed_calls" {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
		}
	}
	return total
}

// within polls cond until it holds or d passes.
func within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond) // polling a server's state: nothing to wait on
	}
}

// everyLive waits until d's subscription on every master is live
// (Subscribe returns at a quorum), for tests that publish on a given
// master: a message there before its subscription is live is lost.
func everyLive(t testing.TB, d *redlock) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		d.mu.Lock()
		all, changed := true, d.changed
		for _, m := range d.masters {
			all = all && m.live
		}
		d.mu.Unlock()
		if all {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatal("not every master's subscription is live within 5s")
		}
	}
}
