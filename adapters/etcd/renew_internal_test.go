package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// renewTTL is the TTL of the renewal tests: etcd's least lease TTL with
// default election settings (as the conformance harness's).
const renewTTL = 2 * time.Second

// calls counts the etcd calls a client makes: Txns, keep-alive messages
// (a LeaseKeepAlive stream's sends) and the other unary calls; and,
// apart, the watch streams it opens and the watches it asks for on them.
type calls struct{ txn, keepAlive, other, watchStreams, watches atomic.Int64 }

func (c *calls) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == "/etcdserverpb.KV/Txn" {
		c.txn.Add(1)
	} else {
		c.other.Add(1)
	}
	return invoke(ctx, method, req, reply, cc, opts...)
}

func (c *calls) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, open grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := open(ctx, desc, cc, method, opts...)
	if err == nil && method == "/etcdserverpb.Watch/Watch" {
		c.watchStreams.Add(1)
		return &watchStream{ClientStream: s, n: &c.watches}, nil
	}
	if err != nil || method != "/etcdserverpb.Lease/LeaseKeepAlive" {
		return s, err
	}
	return &countedStream{ClientStream: s, n: &c.keepAlive}, nil
}

// countedStream counts the messages sent on a stream.
type countedStream struct {
	grpc.ClientStream
	n *atomic.Int64
}

func (s *countedStream) SendMsg(m any) error {
	s.n.Add(1)
	return s.ClientStream.SendMsg(m)
}

// watchStream counts the watches asked for on a watch stream.
type watchStream struct {
	grpc.ClientStream
	n *atomic.Int64
}

func (s *watchStream) SendMsg(m any) error {
	if r, ok := m.(*etcdserverpb.WatchRequest); ok && r.GetCreateRequest() != nil {
		s.n.Add(1)
	}
	return s.ClientStream.SendMsg(m)
}

// total is every call counted so far.
func (c *calls) total() int64 { return c.txn.Load() + c.keepAlive.Load() + c.other.Load() }

func (c *calls) String() string {
	return fmt.Sprintf("%d txns, %d keep-alives, %d other calls", c.txn.Load(), c.keepAlive.Load(), c.other.Load())
}

// countedDriver is a driver on the test etcd over a client whose calls
// are counted, under a prefix of t's own; the client closes when t ends.
func countedDriver(t *testing.T) (*etcdDriver, *calls, *clientv3.Client) {
	u := testenv.URL(t, "LOCKER_TEST_ETCD")
	n := &calls{}
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{strings.Split(u.Host, ",")[0]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(n.unary), grpc.WithChainStreamInterceptor(n.stream)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	prefix := strings.TrimSuffix(u.Path, "/") + "/renew-" + t.Name() + "-" + time.Now().Format("150405.000000") + "/"
	d, err := newDriver(c, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return d, n, c
}

// keepMany has l take n exclusive leases of renewTTL, all at once (so
// that their renewals fall on few ticks, as a busy Locker's would), then
// waits 3×TTL (the keep-alive at work is what is measured) and returns the
// calls made meanwhile. Every lease must still be held.
func keepMany(t *testing.T, l locker.Locker, n int, c *calls) int64 {
	return testenv.KeepMany(t, l, n, renewTTL, c.total, nil)
}

// One Locker's kept-alive leases are renewed in batches: over three TTLs,
// 200 leases cost a few calls per renewal tick (a keep-alive of their one
// etcd lease, and a txn per 128 entries), not two per lease and renewal
// as when each renews alone: that would be 3,600 calls here, and fewer
// than 200 calls means fewer than one per lease over some nine ticks.
// (Measuring the unbatched way beside it, as this test once did, lost
// every lease of that baseline in a full -race run: 200 keep-alives taking
// their turns outlasted the 2 s etcd lease. docs/bench.md has the
// figures of locker bench --leases before batches and after.)
func TestRenewalsBatched(t *testing.T) {
	t.Parallel()
	const n = 200
	d, c, _ := countedDriver(t)
	l := locker.New(d)
	defer l.Close()
	used := keepMany(t, l, n, c)
	t.Logf("batched: %d leases kept alive for 3×TTL with %d calls (in all: %v)", n, used, c)
	if used >= n {
		t.Errorf("%d calls to keep %d leases alive for 3×TTL: renewals are not batched", used, n)
	}
}

// RefreshBatch answers each hold as its Refresh would, in one keep-alive
// per etcd lease (re-entries' values of one lease share it) and one txn
// per 128 entries: a hold whose entry was deleted, or whose etcd lease was
// revoked, is not held, and the others are renewed, their entries kept; a
// hold of another driver is declined.
func TestRefreshBatch(t *testing.T) {
	t.Parallel()
	d, c, direct := countedDriver(t)
	defer d.Close(context.Background())
	ctx := context.Background()
	hs, dedicated := batchHolds(t, d)

	// All held: 2 keep-alives (the shared lease, the dedicated one) and
	// ceil(203/128) = 2 txns.
	txn, ka, other := c.txn.Load(), c.keepAlive.Load(), c.other.Load()
	out := refreshBatch(t, d, hs)
	if got := [3]int64{c.txn.Load() - txn, c.keepAlive.Load() - ka, c.other.Load() - other}; got != [3]int64{2, 2, 0} {
		t.Errorf("RefreshBatch of %d holds made %d txns, %d keep-alives, %d other calls; want 2, 2, 0", len(hs)-1, got[0], got[1], got[2])
	}
	for i, o := range out[:len(hs)-1] {
		if o.Err != nil || o.Valid <= 0 || o.Valid > renewTTL {
			t.Errorf("hold %d: %v, %v; want renewed for up to %v", i, o.Valid, o.Err, renewTTL)
		}
	}
	if !errors.Is(out[len(hs)-1].Err, driver.ErrSkip) {
		t.Errorf("another driver's hold: %v, want driver.ErrSkip", out[len(hs)-1].Err)
	}

	// Entry 7 force-unlocked (its entry deleted), the dedicated lease revoked.
	gone := hs[7].(*hold)
	if _, err := direct.Delete(ctx, gone.name); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Revoke(ctx, dedicated.lease.id); err != nil {
		t.Fatal(err)
	}
	out = refreshBatch(t, d, hs)
	for i, o := range out[:len(hs)-1] {
		notHeld := hs[i] == gone || hs[i] == dedicated
		if notHeld && !errors.Is(o.Err, locker.ErrNotHeld) {
			t.Errorf("hold %d, no longer ours: %v, %v; want ErrNotHeld", i, o.Valid, o.Err)
		}
		if !notHeld && (o.Err != nil || o.Valid <= 0) {
			t.Errorf("hold %d, still ours, beside one not held: %v, %v; want renewed", i, o.Valid, o.Err)
		}
	}
	if n := count(t, direct, d.prefix); n != 200 { // 199 plain, "re"'s; the revoked lease took "own"'s
		t.Errorf("%d entries after a batch with holds not held, want 200: it changed entries", n)
	}
}

// batchHolds acquires, through d, 200 holds on keys of their own, a
// hold and its re-entry (its own etcdLease value of the same lease), and a
// hold with keep-alive off (a lease of its own), then a hold of another
// driver: 204 holds.
func batchHolds(t *testing.T, d *etcdDriver) ([]driver.Hold, *hold) {
	ids := 0
	acquire := func(key string, reentrant, keepAlive bool) *hold {
		t.Helper()
		ids++
		r := &driver.Request{Key: key, Owner: "o-" + key, ID: fmt.Sprint("id-", ids), TTL: renewTTL, KeepAlive: keepAlive, Reentrant: reentrant}
		g, err := d.Acquire(context.Background(), r)
		if err != nil || g.Hold == nil {
			t.Fatalf("Acquire(%q) = %+v, %v", key, g, err)
		}
		return g.Hold.(*hold)
	}
	var hs []driver.Hold
	for i := range 200 {
		hs = append(hs, acquire(fmt.Sprint(i), false, true))
	}
	first, again := acquire("re", true, true), acquire("re", true, true)
	dedicated := acquire("own", false, false)
	if again.lease == first.lease || again.lease.id != first.lease.id || dedicated.lease.id == first.lease.id {
		t.Fatalf("re-entry's etcd lease %p/%x, first %p/%x, dedicated %x: want another value of the same lease, and another lease",
			again.lease, again.lease.id, first.lease, first.lease.id, dedicated.lease.id)
	}
	return append(hs, first, again, dedicated, foreign{}), dedicated
}

// refreshBatch runs d.RefreshBatch on hs, which must answer for each.
func refreshBatch(t *testing.T, d *etcdDriver, hs []driver.Hold) []driver.Refreshed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := d.RefreshBatch(ctx, hs)
	if err != nil || len(out) != len(hs) {
		t.Fatalf("RefreshBatch of %d holds = %d answers, %v", len(hs), len(out), err)
	}
	return out
}

// foreign is another driver's hold.
type foreign struct{}

func (foreign) Refresh(context.Context) (time.Duration, error) { return 0, errors.New("not called") }
func (foreign) Release(context.Context) error                  { return errors.New("not called") }

// A force-unlocked lease among many kept alive in batches ends lost
// within about a TTL; the others stay held, renewed in batches.
func TestRenewalBatchForceUnlock(t *testing.T) {
	t.Parallel()
	const n = 40
	d, c, _ := countedDriver(t)
	l := locker.New(d)
	defer l.Close()
	ctx := context.Background()
	leases := testenv.TakeMany(t, l, n, renewTTL)
	before := c.total()
	forced := leases[n/2]
	if err := l.(locker.Admin).ForceUnlock(ctx, forced.Key()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-forced.Done():
	case <-time.After(3 * renewTTL):
		t.Fatalf("force-unlocked lease still open 3×TTL later")
	}
	if !errors.Is(forced.Err(), locker.ErrLeaseLost) {
		t.Errorf("force-unlocked lease: Err = %v, want ErrLeaseLost", forced.Err())
	}
	time.Sleep(renewTTL) // the others renewed again since: the time under test
	for _, lease := range leases {
		if lease != forced && (lease.Err() != nil || !lease.Deadline().After(time.Now())) {
			t.Errorf("lease %s beside the forced one: Err %v, Deadline %v; want held", lease.Key(), lease.Err(), lease.Deadline())
		}
	}
	used := c.total() - before
	t.Logf("%d leases, one forced, kept alive for about 2×TTL with %d calls (in all: %v)", n, used, c)
	if used >= n {
		t.Errorf("%d calls for %d leases over about 2×TTL: not renewed in batches", used, n)
	}
}
