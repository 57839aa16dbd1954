package locker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locker-go/locker/driver"
)

// treeDriver grants every request of a key nobody else holds, records each
// backend call, and lets a test refuse keys, lose holds and decline
// batches. It keeps modes and batches.
type treeDriver struct {
	mu       sync.Mutex
	calls    []string        // "acquire k", "refresh k", "release k", "batch k1,k2"
	refused  map[string]bool // keys refused until freed
	held     map[string]*treeHold
	wake     map[string]chan struct{}
	notHeld  map[string]int // refreshes of key to answer ErrNotHeld
	skip     bool           // AcquireBatch declines
	batchErr error
	fence    uint64
}

func newTreeDriver() *treeDriver {
	return &treeDriver{refused: map[string]bool{}, held: map[string]*treeHold{}, wake: map[string]chan struct{}{}, notHeld: map[string]int{}}
}

type treeHold struct {
	d    *treeDriver
	key  string
	ttl  time.Duration
	lost context.Context
	lose context.CancelFunc
}

func (d *treeDriver) KeepsModes() {}

func (d *treeDriver) record(s string) {
	d.mu.Lock()
	d.calls = append(d.calls, s)
	d.mu.Unlock()
}

func (d *treeDriver) log() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

func (d *treeDriver) grant(r *driver.Request) driver.Grant {
	if d.refused[r.Key] {
		return driver.Grant{Retry: time.Hour}
	}
	d.fence++
	h := &treeHold{d: d, key: r.Key, ttl: r.TTL}
	h.lost, h.lose = context.WithCancel(context.Background())
	d.held[r.Key] = h
	return driver.Grant{Hold: h, Fence: d.fence, Lost: h.lost}
}

func (d *treeDriver) Acquire(_ context.Context, r *driver.Request) (driver.Grant, error) {
	d.record("acquire " + r.Key + " " + r.Mode.String())
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.grant(r), nil
}

func (d *treeDriver) AcquireBatch(_ context.Context, rs []*driver.Request) ([]driver.Grant, error) {
	keys := make([]string, len(rs))
	for i, r := range rs {
		keys[i] = r.Key
	}
	d.record("batch " + strings.Join(keys, ","))
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.skip:
		return nil, driver.ErrSkip
	case d.batchErr != nil:
		return nil, d.batchErr
	}
	gs := make([]driver.Grant, len(rs))
	for i, r := range rs {
		if d.refused[r.Key] {
			gs[i].Retry = time.Hour
			return gs[:len(rs):len(rs)], nil
		}
	}
	for i, r := range rs {
		gs[i] = d.grant(r)
	}
	return gs, nil
}

func (d *treeDriver) ReleaseBatch(ctx context.Context, hs []driver.Hold) ([]error, error) {
	if d.skip {
		return nil, driver.ErrSkip
	}
	keys := make([]string, len(hs))
	for i, h := range hs {
		keys[i] = h.(*treeHold).key
	}
	d.record("release-batch " + strings.Join(keys, ","))
	errs := make([]error, len(hs))
	for i, h := range hs {
		h := h.(*treeHold)
		d.mu.Lock()
		if d.held[h.key] == h {
			delete(d.held, h.key)
		} else {
			errs[i] = ErrNotHeld
		}
		d.mu.Unlock()
	}
	return errs, nil
}

func (d *treeDriver) Abandon(context.Context, *driver.Request) {}
func (d *treeDriver) Close(context.Context) error              { return nil }

func (d *treeDriver) Subscribe(_ context.Context, r *driver.Request) (<-chan struct{}, func(), error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := make(chan struct{}, 1)
	d.wake[r.Key] = c
	return c, func() {}, nil
}
func (d *treeDriver) Listening() bool { return true }

// free stops refusing key and wakes its waiter.
func (d *treeDriver) free(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.refused, key)
	if c := d.wake[key]; c != nil {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (h *treeHold) Refresh(context.Context) (time.Duration, error) {
	h.d.record("refresh " + h.key)
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if h.d.notHeld[h.key] > 0 {
		h.d.notHeld[h.key]--
		delete(h.d.held, h.key)
		return 0, ErrNotHeld
	}
	return h.ttl, nil
}

func (h *treeHold) Release(context.Context) error {
	h.d.record("release " + h.key)
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if h.d.held[h.key] != h {
		return ErrNotHeld
	}
	delete(h.d.held, h.key)
	return nil
}

func count(calls []string, prefix string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// A subtree lock takes its path root first (in one batch), holds the
// ancestors in an intention mode, and lets the path go before them.
func TestSubtreeTakesRootFirstAndReleasesLeafFirst(t *testing.T) {
	d := newTreeDriver()
	lk := New(d)
	defer lk.Close()
	ctx := context.Background()
	lease, err := lk.Lock(ctx, "a/b/c", Subtree(), Shared())
	if err != nil {
		t.Fatal(err)
	}
	if calls := d.log(); !slices.Equal(calls, []string{"batch a,a/b,a/b/c"}) {
		t.Errorf("calls = %q, want one batch of the path's nodes, root first", calls)
	}
	if lease.Key() != "a/b/c" || lease.Fence() != 3 {
		t.Errorf("lease key %q, fence %d; want a/b/c and its own node's fence 3", lease.Key(), lease.Fence())
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := d.log()[1:]; !slices.Equal(calls, []string{"release-batch a/b/c,a/b,a"}) {
		t.Errorf("release calls = %q, want one batch, the path's node first", calls)
	}
	d.skip = true
	lease, err = lk.TryLock(ctx, "x/y", Subtree(), Shared())
	if err != nil {
		t.Fatal(err)
	}
	if calls := d.log()[2:]; !slices.Equal(calls, []string{"batch x,x/y", "acquire x IS", "acquire x/y S"}) {
		t.Errorf("calls after a declined batch = %q, want the nodes one by one, root first, IS then S", calls)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := d.log()[5:]; !slices.Equal(calls, []string{"release x/y", "release x"}) {
		t.Errorf("release calls after a declined batch = %q, want the path's node first, then its ancestor", calls)
	}
}

// A node lost ends the whole lease, and the other nodes are let go.
func TestSubtreeNodeLostEndsTheLease(t *testing.T) {
	d := newTreeDriver()
	lk := New(d)
	defer lk.Close()
	lease, err := lk.Lock(context.Background(), "a/b/c", Subtree(), WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	d.held["a/b"].lose()
	d.mu.Unlock()
	select {
	case <-lease.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lease still live 5s after a node was lost")
	}
	if !errors.Is(lease.Err(), ErrLeaseLost) {
		t.Errorf("Err = %v, want ErrLeaseLost", lease.Err())
	}
	deadline := time.Now().Add(5 * time.Second)
	for count(d.log(), "release") < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if calls := d.log(); calls[1] != "release-batch a/b/c,a/b,a" {
		t.Errorf("calls after the loss = %q, want every node let go, the path's first", calls)
	}
}

// While a Lock waits for a node, the nodes it holds are renewed; should
// one be lost meanwhile, it starts again.
func TestOrderedTakeRenewsAndRestarts(t *testing.T) {
	d := newTreeDriver()
	d.skip = true
	d.refused["a/b"] = true
	d.notHeld["a"] = 1 // the first renewal of "a" finds it gone
	lk := New(d)
	defer lk.Close()
	got := make(chan error, 1)
	go func() {
		lease, err := lk.Lock(context.Background(), "a/b", Subtree(), WithTTL(150*time.Millisecond))
		if err == nil {
			err = lease.Unlock(context.Background())
		}
		got <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for count(d.log(), "refresh a") < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	d.free("a/b")
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	calls := d.log()
	if count(calls, "acquire a IX") < 2 {
		t.Errorf("calls = %q: the lost ancestor was not taken again", calls)
	}
	if count(calls, "refresh a") < 3 {
		t.Errorf("calls = %q: the ancestor was not renewed while the path was waited for", calls)
	}
}

// A refused batch of a Lock waits in order; of a TryLock it is ErrLocked.
func TestRefusedBatch(t *testing.T) {
	d := newTreeDriver()
	d.refused["k2"] = true
	lk := New(d)
	defer lk.Close()
	ctx := context.Background()
	if _, err := TryLockAll(ctx, lk, []string{"k2", "k1"}); !errors.Is(err, ErrLocked) {
		t.Errorf("TryLockAll with a key refused = %v, want ErrLocked", err)
	}
	if calls := d.log(); !slices.Equal(calls, []string{"batch k1,k2"}) {
		t.Errorf("calls = %q, want one batch, sorted", calls)
	}
	got := make(chan error, 1)
	go func() {
		leases, err := LockAll(ctx, lk, []string{"k2", "k1"})
		if err == nil && (leases[0].Key() != "k2" || leases[1].Key() != "k1") {
			err = errors.New("leases out of order")
		}
		got <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for count(d.log(), "acquire k2") < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	d.free("k2")
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if calls := d.log()[1:]; !slices.Equal(calls[:3], []string{"batch k1,k2", "acquire k1 X", "acquire k2 X"}) {
		t.Errorf("calls = %q, want the batch, then k1 and k2 in order", calls)
	}
	d.batchErr = Unavailable(errors.New("down"))
	if _, err := LockAll(ctx, lk, []string{"k3", "k4"}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("LockAll whose batch failed = %v, want ErrUnavailable", err)
	}
}

// LockAll over a Locker that is not the portable one (a wrapper) takes
// the keys in sorted order, as one owner, and lets them all go on failure.
func TestLockAllOverAWrapper(t *testing.T) {
	d := newTreeDriver()
	lk := wrapped{New(d)}
	defer lk.Close()
	d.refused["c"] = true
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := LockAll(ctx, lk, []string{"c", "b", "a"}); !errors.Is(err, ErrLocked) {
		t.Errorf("LockAll = %v, want ErrLocked", err)
	}
	calls := d.log()
	if !slices.Equal(calls[:3], []string{"acquire a X", "acquire b X", "acquire c X"}) || count(calls, "release ") != 2 {
		t.Errorf("calls = %q, want a, b, c in order and a, b let go", calls)
	}
}

type wrapped struct{ Locker }
