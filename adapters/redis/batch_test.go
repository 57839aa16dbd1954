package redis

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// counter counts the commands a client sends, pipelined ones included,
// and keeps the last one's arguments.
type counter struct {
	n    atomic.Int64
	last atomic.Value
}

func (c *counter) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (c *counter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.n.Add(1)
		c.last.Store(fmt.Sprint(cmd.Args()))
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// Count is how many commands were sent; Last, the last one's arguments.
func (c *counter) Count() int64 { return c.n.Load() }
func (c *counter) Last() any    { return c.last.Load() }

// LockAll of 10 keys takes them in one round trip, and a subtree lock of
// depth 5 takes and lets go of its nodes in one each.
func TestBatchesAreOneRoundTrip(t *testing.T) {
	opt, err := goredis.ParseURL(testenv.URL(t, "LOCKER_TEST_REDIS").String())
	if err != nil {
		t.Fatal(err)
	}
	client := goredis.NewClient(opt)
	defer client.Close()
	var c counter
	client.AddHook(&c)
	l, err := New(client, WithPrefix("locker-batch-test:"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	run := rand.Text()
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/%d", run, i)
	}
	// counted runs take (first once unmeasured: a script's first use loads
	// it) and reports the commands of its second run; it unlocks the leases.
	counted := func(name string, take func() ([]locker.Lease, error)) {
		t.Helper()
		for round := range 2 {
			before := c.n.Load()
			leases, err := take()
			n := c.n.Load() - before
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if round == 1 && n != 1 {
				t.Errorf("%s: %d commands, want one round trip", name, n)
			}
			before = c.n.Load()
			for _, lease := range leases {
				if err := lease.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if n := c.n.Load() - before; round == 1 && len(leases) == 1 && n != 1 {
				t.Errorf("unlock after %s: %d commands, want one", name, n)
			}
		}
	}
	counted("LockAll of 10 keys", func() ([]locker.Lease, error) { return locker.LockAll(ctx, l, keys) })
	counted("a subtree lock of depth 5", func() ([]locker.Lease, error) {
		lease, err := l.Lock(ctx, run+"/a/b/c/d", locker.Subtree())
		return []locker.Lease{lease}, err
	})
}

func TestHashTagged(t *testing.T) {
	for prefix, want := range map[string]bool{"locker:": false, "{locker}:": true, "a{b}c": true, "{}": false, "a{": false, "}{x}": true} {
		if got := hashTagged(prefix); got != want {
			t.Errorf("hashTagged(%q) = %v, want %v", prefix, got, want)
		}
	}
}
