package redsync

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// calls is a hook that keeps the scripts a client has in flight and the
// errors its calls ended with.
type calls struct {
	mu     sync.Mutex
	out    map[*goredis.Cmd]string // in flight: the script's hash
	ran    []string                // every script called
	beside [][2]string             // a script called while another was out
	ended  []error
	change chan struct{} // signalled at each call's end
}

func newCalls() *calls { return &calls{out: map[*goredis.Cmd]string{}, change: make(chan struct{}, 1)} }

func (c *calls) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (c *calls) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

func (c *calls) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		x, ok := cmd.(*goredis.Cmd)
		args := cmd.Args()
		if !ok || len(args) < 2 || cmd.Name() != "evalsha" {
			return next(ctx, cmd)
		}
		sha, _ := args[1].(string)
		c.mu.Lock()
		for _, other := range c.out {
			c.beside = append(c.beside, [2]string{sha, other})
		}
		c.out[x], c.ran = sha, append(c.ran, sha)
		c.mu.Unlock()
		err := next(ctx, cmd)
		c.mu.Lock()
		delete(c.out, x)
		c.ended = append(c.ended, err)
		c.mu.Unlock()
		select {
		case c.change <- struct{}{}:
		default:
		}
		return err
	}
}

// idle reports whether no call is out.
func (c *calls) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.out) == 0
}

// endedCalls is how many calls ended.
func (c *calls) endedCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ended)
}

// A round that a quorum of masters has decided does not wait for the
// others: with two of five masters stopped (their connections open, no
// reply) and a node timeout of 10 s, Lock and Unlock return within their
// context's 5 s, none of their calls to those masters having ended.
// A quorum of grants with one counter settles the fence with no claim
// round. The release reaches the stopped masters only once they replied
// to the grant, so that it cannot land before it: once they go on,
// nothing is left held there.
func TestRoundDecidedByAQuorumDoesNotWaitForTheRest(t *testing.T) {
	testenv.URL(t, "LOCKER_TEST_REDLOCK") // -short skips; the same binary serves both
	var servers []*testenv.RedisServer
	for range 5 {
		servers = append(servers, testenv.StartRedis(t, 0))
	}
	var clients []goredis.UniversalClient
	hooks := make([]*calls, len(servers))
	for i, s := range servers {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
		hooks[i] = newCalls()
		c.AddHook(hooks[i])
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	l, err := New(clients, WithNodeTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	// A first grant on fresh masters draws each counter from its clock
	// and claims one fence on all of them, which lines the counters up.
	lockUnlock(t, l, "early/first")
	for i, h := range hooks {
		waitFor(t, h, func() bool { return h.idle() }, fmt.Sprintf("master %d: the first grant's calls out", i))
		h.mu.Lock()
		h.ran, h.ended = nil, nil
		h.mu.Unlock()
	}
	for _, s := range servers[3:] {
		s.Stop()
		t.Cleanup(s.Cont) // should the test fail before it goes on
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	lease, err := l.Lock(ctx, "early/key", locker.WithTTL(10*time.Minute))
	if err != nil || ctx.Err() != nil {
		t.Fatalf("Lock with 2 of 5 masters stopped: %v (ctx: %v)", err, ctx.Err())
	}
	for i, h := range hooks[3:] {
		if n := h.endedCalls(); n != 0 {
			t.Errorf("stopped master %d: %d calls ended before Lock returned, want none", 3+i, n)
		}
	}
	for i, h := range hooks[:3] {
		h.mu.Lock()
		claimed := slices.Contains(h.ran, claimScript.Hash())
		h.mu.Unlock()
		if claimed {
			t.Errorf("master %d: a claim round; a quorum of grants with one counter needs none", i)
		}
	}
	if err := lease.Unlock(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("Unlock with 2 of 5 masters stopped: %v (ctx: %v)", err, ctx.Err())
	}
	for i, h := range hooks[3:] {
		if n := h.endedCalls(); n != 0 {
			t.Errorf("stopped master %d: %d calls ended before Unlock returned, want none", 3+i, n)
		}
	}
	for _, s := range servers[3:] {
		s.Cont()
	}
	anchor := (&redlock{cfg: config{prefix: DefaultPrefix}}).anchor(name{key: "early/key"})
	defer releaseDecidedByAQuorum(t, l, servers, hooks) // then: masters that stall after the grant
	for i, h := range hooks[3:] {
		waitFor(t, h, func() bool {
			n, err := clients[3+i].Exists(t.Context(), anchor).Result()
			return err == nil && n == 0
		}, fmt.Sprintf("master %d, once it went on: the key's anchor left", 3+i))
		// The release goes there once the grant's reply is in: sent
		// before, it might land first and leave the grant behind.
		h.mu.Lock()
		early := slices.Contains(h.beside, [2]string{releaseScript.Hash(), acquireScript.Hash()})
		h.mu.Unlock()
		if early {
			t.Errorf("stopped master %d: the release was sent while the grant's call was out", 3+i)
		}
	}
}

// releaseDecidedByAQuorum checks that an Unlock whose grant every master
// answered, two of which stall before the release, returns within its
// context's 5 s (the node timeout is 10 s), none of its calls to them
// having ended.
func releaseDecidedByAQuorum(t *testing.T, l locker.Locker, servers []*testenv.RedisServer, hooks []*calls) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for _, h := range hooks {
		h.mu.Lock()
		h.ran = nil
		h.mu.Unlock()
	}
	lease, err := l.Lock(ctx, "early/then", locker.WithTTL(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range hooks { // every master has the grant: none is out
		waitFor(t, h, func() bool {
			h.mu.Lock()
			defer h.mu.Unlock()
			return slices.Contains(h.ran, acquireScript.Hash()) && len(h.out) == 0
		}, fmt.Sprintf("master %d: the grant's call", i))
		h.mu.Lock()
		h.ended = nil
		h.mu.Unlock()
	}
	for _, s := range servers[3:] {
		s.Stop()
	}
	if err := lease.Unlock(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("Unlock with 2 of 5 masters stopped after the grant: %v (ctx: %v)", err, ctx.Err())
	}
	for i, h := range hooks[3:] {
		if n := h.endedCalls(); n != 0 {
			t.Errorf("master %d, stopped after the grant: %d calls ended before Unlock returned, want none", 3+i, n)
		}
	}
	for _, s := range servers[3:] {
		s.Cont()
	}
}

// waitFor waits until cond, checked at each end of one of h's calls, or
// fails t after 30 s.
func waitFor(t *testing.T, h *calls, cond func() bool, what string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-h.change:
		case <-timeout:
			t.Fatalf("%s 30 s on", what)
		}
	}
}

// BenchmarkLockUnlockTwoMastersStopped is the bad day's Lock and Unlock:
// two of five masters stopped (connections open, no reply), the default
// node timeout (750 ms at the default TTL).
func BenchmarkLockUnlockTwoMastersStopped(b *testing.B) {
	testenv.URL(b, "LOCKER_TEST_REDLOCK")
	var clients []goredis.UniversalClient
	var servers []*testenv.RedisServer
	for range 5 {
		s := testenv.StartRedis(b, 0)
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
		b.Cleanup(func() { _ = c.Close() })
		clients, servers = append(clients, c), append(servers, s)
	}
	l, err := New(clients)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := b.Context()
	lease, err := l.Lock(ctx, "bench/first") // lines the counters up (see the test above)
	if err != nil {
		b.Fatal(err)
	}
	_ = lease.Unlock(ctx)
	for _, s := range servers[3:] {
		s.Stop()
		defer s.Cont() // before Close, which waits for the late replies
	}
	b.ResetTimer()
	for b.Loop() {
		lease, err := l.Lock(ctx, "bench/key")
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// A holder's fence, as Status reads it from the masters' records, is the
// largest recorded on a quorum: a master that granted after a quorum
// decided may have counted past the grant's fence (until it is told it),
// and one that counted lower learns it in the background. Short of a
// quorum of any one value (masters unanswered), the largest.
func TestStatusFenceIsTheQuorums(t *testing.T) {
	for _, c := range []struct {
		fences []uint64
		want   uint64
	}{
		{[]uint64{7, 7, 7, 9, 9}, 7}, // two late masters counted past it
		{[]uint64{7, 7, 7, 5, 5}, 7}, // two learn it in the background
		{[]uint64{7, 5, 5}, 7},       // two of the 7s unanswered
		{[]uint64{7, 7, 7}, 7},
		{[]uint64{0, 0, 0}, 0}, // intention holders draw none
	} {
		var recs []driver.Holder
		for _, f := range c.fences {
			recs = append(recs, driver.Holder{Owner: "o", Fence: f, Holds: 1})
		}
		if got := mergeHolder(recs, 3).Fence; got != c.want {
			t.Errorf("records with fences %v: Status says %d, want %d", c.fences, got, c.want)
		}
	}
}

// A Status read while a grant's fence is settling, a quorum of its
// records at the counts the masters drew and two at the larger fence
// that the grant takes (votes.fence claims it), reads the masters again
// until they agree, rather than name the holder by a count it never had:
// an election's observer once saw its new leader so.
func TestStatusReadsAgainWhileAFenceSettles(t *testing.T) {
	l, clients := plainLocker(t)
	ctx := t.Context()
	key := uniqueKey(t, "settle")
	lease, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Unlock(ctx)
	anchor := l.anchor(name{driver.Plain, key})
	fields, err := clients[0].HGetAll(ctx, anchor).Result()
	if err != nil {
		t.Fatal(err)
	}
	var field string
	for f := range fields {
		if strings.HasPrefix(f, "f0") {
			field = f
		}
	}
	if field == "" {
		t.Fatalf("no Exclusive holder's fence among %v", fields)
	}
	f := lease.Fence()
	setFence := func(fence uint64, cs ...goredis.UniversalClient) {
		for _, c := range cs {
			if err := c.HSet(ctx, anchor, field, fence).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	setFence(f, clients[:3]...)   // the counts a quorum drew (a fresh key's differ: set)
	setFence(f+3, clients[3:]...) // the claim's target, on two masters so far
	pauses := 0
	l.settlePause = func(context.Context) error {
		pauses++
		setFence(f+3, clients[:3]...) // the claim lands
		return nil
	}
	info, err := l.Status(ctx, driver.Plain, key)
	if err != nil || info.Fence != f+3 || pauses != 1 {
		t.Fatalf("Status while the fence settled: fence %d (%v) after %d pauses; want %d after one", info.Fence, err, pauses, f+3)
	}
	// The counts of late masters above the fence on a quorum, which they
	// have yet to learn, keep the reads going but a bounded few times.
	setFence(f+9, clients[4])
	pauses = 0
	l.settlePause = func(context.Context) error { pauses++; return nil }
	if info, err := l.Status(ctx, driver.Plain, key); err != nil || info.Fence != f+3 || pauses != settleReads {
		t.Fatalf("Status with a late master past the fence: %d (%v) after %d pauses; want %d after %d", info.Fence, err, pauses, f+3, settleReads)
	}
}
