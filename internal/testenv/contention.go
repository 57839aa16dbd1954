package testenv

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance/history"
)

// Contention runs clients that take one key in turn, each holding it until
// a short hold ends or its lease does, and counts what must never happen:
// two holders at once, a fence not above the one before.
type Contention struct {
	inside, overlaps, fenceBack atomic.Int32
	acquired                    atomic.Int64
	mu                          sync.Mutex
	last                        uint64
	firstAfter                  chan struct{} // closed at the first grant after arm
	armed                       atomic.Bool
	once                        sync.Once
	errs                        sync.Map      // error text -> count, for a failure message
	progress                    chan struct{} // a signal per grant, dropped when one is pending
	rec                         *history.Recorder
}

// WaitGrants waits until acquired reaches n, or fails t after d.
func (c *Contention) WaitGrants(t *testing.T, n int64, d time.Duration, what string) {
	t.Helper()
	timeout := time.After(d)
	for c.acquired.Load() < n {
		select {
		case <-c.progress:
		case <-timeout:
			c.errs.Range(func(k, v any) bool { t.Logf("%d× %s", v.(*atomic.Int32).Load(), k); return true })
			t.Fatalf("%s: %d grants of %d within %v", what, c.acquired.Load(), n, d)
		}
	}
}

// Work is one client: it takes key in turn with the others until ctx
// ends, every call recorded in the history Check checks.
func (c *Contention) Work(ctx context.Context, l locker.Locker, key string) {
	client := c.rec.Client()
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		lease, err := client.Lock(lctx, l, key)
		cancel()
		if err != nil {
			n, _ := c.errs.LoadOrStore(err.Error(), new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			continue // an election in progress: try again
		}
		if c.inside.Add(1) > 1 {
			c.overlaps.Add(1)
		}
		c.mu.Lock()
		if lease.Fence() <= c.last {
			c.fenceBack.Add(1)
		}
		c.last = lease.Fence()
		c.mu.Unlock()
		c.acquired.Add(1)
		select {
		case c.progress <- struct{}{}:
		default:
		}
		if c.armed.Load() {
			c.once.Do(func() { close(c.firstAfter) })
		}
		select {
		case <-time.After(2 * time.Millisecond): // the hold
		case <-lease.Done():
		}
		c.inside.Add(-1)
		if err := lease.Unlock(context.Background()); err != nil {
			n, _ := c.errs.LoadOrStore("Unlock: "+err.Error(), new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
		}
	}
}

// NewContention returns a Contention ready for Work.
func NewContention() *Contention {
	return &Contention{firstAfter: make(chan struct{}), progress: make(chan struct{}, 1), rec: history.New()}
}

// Arm makes the next grant close FirstAfter.
func (c *Contention) Arm() { c.armed.Store(true) }

// FirstAfter is closed at the first grant after Arm.
func (c *Contention) FirstAfter() <-chan struct{} { return c.firstAfter }

// Acquired is how many grants the clients have had.
func (c *Contention) Acquired() int64 { return c.acquired.Load() }

// Check fails t if two holders ever held the key at once or a fence was
// not above the one before, as counted and as the recorded history shows
// (checked against a fenced lease; a failing one is drawn as HTML in t's
// artifacts). Every client must have stopped.
func (c *Contention) Check(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.rec.Check(ctx); err != nil {
		history.WriteArtifact(t, err)
		t.Error(err)
	} else {
		t.Logf("history of %d calls: linearizable", c.rec.Len())
	}
	if n := c.overlaps.Load(); n > 0 {
		t.Errorf("%d times two holders at once", n)
	}
	if n := c.fenceBack.Load(); n > 0 {
		t.Errorf("%d fences not above the one before", n)
	}
}

// KillUnderContention has four clients of url take one key in turn, calls
// kill once they are under way (it kills a server: a leader, say), and
// checks that the key then passes on with no two holders at once and no
// fence going back.
func KillUnderContention(t *testing.T, url string, kill func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := NewContention()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before Wait: the clients stop at ctx's end
	for range 4 {
		l, err := locker.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		wg.Go(func() { c.Work(ctx, l, "kill-under-contention") })
	}
	c.WaitGrants(t, 50, 30*time.Second, "before the kill")
	killed := time.Now()
	c.Arm()
	kill()
	select {
	case <-c.FirstAfter():
		t.Logf("first grant %v after the kill", time.Since(killed).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		c.WaitGrants(t, c.Acquired()+1, 0, "after the kill") // fails, with the errors seen
	}
	c.WaitGrants(t, c.Acquired()+50, 30*time.Second, "after the first grant past the kill") // they go on
	cancel()
	wg.Wait()
	c.Check(t)
}
