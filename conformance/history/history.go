// Package history records what the clients of a Locker saw — every Lock,
// TryLock, Unlock and Refresh with its start and end, lease, fence and
// result, and when each lease ended by itself — and checks the record
// against a model of a fenced lease with porcupine, the linearizability
// checker etcd's robustness tests use. A history passes when some order of
// its operations, each placed between its start and its end, obeys the
// model: one holder per key at a time, fences rising with every grant, only
// the holder releasing. A failing history comes with porcupine's HTML
// visualization, so the failure can be read.
//
// The suite's Linearizable check and the project's fault tests record
// their clients through a Recorder; any test can.
package history

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/locker-go/locker"
)

// Recorder collects one history. It is safe for concurrent use.
type Recorder struct {
	start   int64 // clock() at New
	mu      sync.Mutex
	ops     []porcupine.Operation
	leases  int
	clients int
	live    sync.WaitGroup // a watcher per granted lease, until its Done
}

// New starts a history.
func New() *Recorder { return &Recorder{start: clock()} }

// Client is one client of a history: a row in its visualization. Its calls
// may run concurrently.
type Client struct {
	r  *Recorder
	id int
}

// Client returns a new client of r.
func (r *Recorder) Client() *Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clients++
	return &Client{r: r, id: r.clients - 1}
}

// Lock calls l.Lock and records it. The lease it returns records its
// Unlock and Refresh calls, and its end if it ends by itself. Shared and
// Subtree among opts are recorded as the lease's mode and space.
func (c *Client) Lock(ctx context.Context, l locker.Locker, key string, opts ...locker.Option) (locker.Lease, error) {
	return c.acquire(call(key, opts), func() (locker.Lease, error) { return l.Lock(ctx, key, opts...) })
}

// TryLock calls l.TryLock and records it, as Lock does.
func (c *Client) TryLock(ctx context.Context, l locker.Locker, key string, opts ...locker.Option) (locker.Lease, error) {
	return c.acquire(call(key, opts), func() (locker.Lease, error) { return l.TryLock(ctx, key, opts...) })
}

// LockAll calls locker.LockAll and records it as one acquire per key, each
// over the whole call; a failed one as a failed acquire of every key.
func (c *Client) LockAll(ctx context.Context, l locker.Locker, keys []string, opts ...locker.Option) ([]locker.Lease, error) {
	t0 := c.r.now()
	leases, err := locker.LockAll(ctx, l, keys, opts...)
	t1 := c.r.now()
	for i, key := range keys {
		in := call(key, opts)
		if err != nil {
			in.kind = failed
			c.r.add(c.id, in, t0, output{result: other}, t1)
			continue
		}
		leases[i] = c.granted(in, leases[i], t0, t1)
	}
	return leases, err
}

// call is the input of an acquire of key with opts.
func call(key string, opts []locker.Option) input {
	o, _ := locker.Resolve(key, opts...)
	return input{kind: acquire, key: key, shared: o.Shared, subtree: o.Subtree}
}

func (c *Client) acquire(in input, take func() (locker.Lease, error)) (locker.Lease, error) {
	t0 := c.r.now()
	lease, err := take()
	t1 := c.r.now()
	switch {
	case err == nil:
		return c.granted(in, lease, t0, t1), nil
	case errors.Is(err, locker.ErrLocked) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		c.r.add(c.id, in, t0, output{result: refused}, t1)
	default: // a Lock whose ctx ended as it waited may leave a grant for the background to drop
		in.kind = failed
		c.r.add(c.id, in, t0, output{result: other}, t1)
	}
	return lease, err
}

// granted records the grant of lease, taken between t0 and t1, and
// returns it recording its calls.
func (c *Client) granted(in input, lease locker.Lease, t0, t1 int64) locker.Lease {
	in.lease = c.r.newLease()
	c.r.add(c.id, in, t0, output{fence: lease.Fence()}, t1)
	in.kind = release
	rec := &recorded{Lease: lease, c: c, in: in}
	c.r.live.Go(func() { c.r.watch(c.id, rec) })
	return rec
}

// recorded is a granted lease whose calls go into the history.
type recorded struct {
	locker.Lease
	c  *Client
	in input // its key, mode, space and lease number
}

func (l *recorded) input(k kind) input {
	in := l.in
	in.kind = k
	return in
}

// Unlock records the call. One that failed for another reason than "not
// ours" is recorded as the lease's end from its start on: the portable
// layer goes on releasing the key in the background.
func (l *recorded) Unlock(ctx context.Context) error {
	r := l.c.r
	t0 := r.now()
	err := l.Lease.Unlock(ctx)
	in, out := l.input(release), output{result: classify(err)}
	if out.result == other {
		in.kind = end
		r.add(l.c.id, in, t0, out, math.MaxInt64)
		return err
	}
	r.add(l.c.id, in, t0, out, r.now())
	return err
}

// Refresh records the call.
func (l *recorded) Refresh(ctx context.Context) error {
	r := l.c.r
	t0 := r.now()
	err := l.Lease.Refresh(ctx)
	r.add(l.c.id, l.input(refresh), t0, output{result: classify(err)}, r.now())
	return err
}

// watch records l's end if it ends by itself (expired or lost): from its
// Deadline, or from when its Done was seen closed if that came first,
// until any time later (the backend frees the key after the holder stops).
func (r *Recorder) watch(client int, l *recorded) {
	<-l.Done()
	seen := r.now()
	if !errors.Is(l.Err(), locker.ErrLeaseLost) {
		return // unlocked: its Unlock is in the history
	}
	from := min(seen, seen+int64(time.Until(l.Deadline())))
	r.add(client, l.input(end), from, output{}, math.MaxInt64)
}

func classify(err error) result {
	switch {
	case err == nil:
		return ok
	case errors.Is(err, locker.ErrNotHeld), errors.Is(err, locker.ErrLeaseLost):
		return notHeld
	}
	return other
}

func (r *Recorder) now() int64 { return clock() - r.start }

func (r *Recorder) newLease() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leases++
	return r.leases
}

func (r *Recorder) add(client int, in input, call int64, out output, ret int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// Len is the number of operations recorded so far.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// checkTimeout bounds porcupine's search; histories partitioned by key
// finish in milliseconds.
const checkTimeout = time.Minute

// Check waits until every lease granted in the history has ended (Unlock
// them first), then checks the history: nil if it obeys the model, a
// *Violation if it does not, another error if ctx ended first or the
// checker could not decide in time.
func (r *Recorder) Check(ctx context.Context) error {
	if err := r.wait(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	ops := make([]porcupine.Operation, len(r.ops))
	copy(ops, r.ops)
	r.mu.Unlock()
	last := int64(0)
	for _, op := range ops {
		if op.Return != math.MaxInt64 {
			last = max(last, op.Return)
		}
	}
	for i := range ops {
		ops[i].Return = min(ops[i].Return, last+1) // ends run on past the history
		ops[i].Call = min(ops[i].Call, ops[i].Return)
	}
	ops = dropContendedRefusals(ops)
	res, info := porcupine.CheckOperationsVerbose(model, ops, checkTimeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Illegal:
		return &Violation{ops: len(ops), info: info}
	}
	return fmt.Errorf("history: the checker could not decide on %d operations within %v", len(ops), checkTimeout)
}

// dropContendedRefusals leaves out the refusals that overlap another
// acquire in their partition: where the backend queues (ZooKeeper's
// sequential nodes), a TryLock sees a competing attempt's place in the
// queue, which that attempt may give up a moment later, so the key was
// taken, if only by an attempt; and a waiting exclusive Lock keeps later
// shared ones out (as a waiter on an ancestor path keeps out a subtree
// lock below it) without holding anything. A refusal changes no state in
// the model, so leaving one out drops a check, never makes a violation
// pass that another call shows.
func dropContendedRefusals(ops []porcupine.Operation) []porcupine.Operation {
	contended := func(r porcupine.Operation) bool {
		in := r.Input.(input)
		for _, o := range ops {
			oi := o.Input.(input)
			if o != r && oi.partition() == in.partition() && (oi.kind == acquire || oi.kind == failed) &&
				o.Call < r.Return && r.Call < o.Return {
				return true
			}
		}
		return false
	}
	kept := ops[:0:0]
	for _, op := range ops {
		if op.Input.(input).kind != acquire || op.Output.(output).result != refused || !contended(op) {
			kept = append(kept, op)
		}
	}
	return kept
}

// Violation is a history that no order of its operations explains: two
// holders at once, a fence that did not rise, a release or refresh the
// holder should not have had, or a refusal of a free key.
type Violation struct {
	ops  int
	info porcupine.LinearizationInfo
}

func (v *Violation) Error() string {
	return fmt.Sprintf("history of %d operations is not linearizable against a fenced lease "+
		"(two holders at once, a fence not rising, a wrong release or refusal): its visualization shows where", v.ops)
}

// WriteHTML writes porcupine's visualization of the history to path.
func (v *Violation) WriteHTML(path string) error {
	return porcupine.VisualizePath(model, v.info, path)
}

// WriteArtifact writes the visualization of the history that err reports
// not linearizable, if it does, into t's artifact directory (kept by go
// test -artifacts, under -outputdir) and logs the file's path.
func WriteArtifact(t testing.TB, err error) {
	t.Helper()
	var v *Violation
	if !errors.As(err, &v) {
		return
	}
	path := filepath.Join(t.ArtifactDir(), "history.html")
	if werr := v.WriteHTML(path); werr != nil {
		t.Logf("history visualization: %v", werr)
		return
	}
	t.Logf("history visualization: %s", path)
}
