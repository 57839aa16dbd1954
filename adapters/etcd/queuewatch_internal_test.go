package etcd

import (
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker/driver"
)

// A waiter that joins a queue's watch after it reported a deletion is
// told, first thing, the highest revision the watch reported (as a watch
// of its own would tell its creation's), so that a waiter that read the
// queue before that deletion reads again rather than wait for an event
// that has gone by. Both waiters share the one watch, which ends once
// nobody has listened for the linger.
func TestQueueWatchJoinAfterAnEvent(t *testing.T) {
	t.Parallel()
	_, d, c := testLocker(t)
	d.waits.linger = 50 * time.Millisecond
	ctx := t.Context()
	q := d.queue(driver.Plain, "watch-"+rand.Text())
	put, err := c.Put(ctx, q+"e", "")
	if err != nil {
		t.Fatal(err)
	}
	read := put.Header.Revision // a waiter's read of the queue
	first, leaveFirst := d.listen(q)
	if resp := next(t, first); !resp.Created {
		t.Fatalf("first response %+v, want the creation", resp)
	}
	del, err := c.Delete(ctx, q+"e")
	if err != nil {
		t.Fatal(err)
	}
	if resp := next(t, first); len(resp.Events) != 1 || resp.Events[0].Type != mvccpb.DELETE {
		t.Fatalf("got %+v, want the deletion", resp)
	}
	late, leaveLate := d.listen(q)
	resp := next(t, late)
	if !resp.Created || resp.Header.Revision < del.Header.Revision || resp.Header.Revision <= read {
		t.Fatalf("a late waiter's first response %+v; want its creation at %d or later", resp, del.Header.Revision)
	}
	d.waits.mu.Lock()
	shared := len(d.waits.m)
	d.waits.mu.Unlock()
	if shared != 1 {
		t.Fatalf("%d watches for two waiters of one queue, want 1", shared)
	}
	leaveFirst()
	leaveLate()
	waitNoWatch(t, d)
}

// next is wch's next response, within 10 s.
func next(t *testing.T, wch clientv3.WatchChan) clientv3.WatchResponse {
	t.Helper()
	select {
	case resp, ok := <-wch:
		if !ok {
			t.Fatal("the watch ended")
		}
		return resp
	case <-time.After(10 * time.Second):
		t.Fatal("no response in 10 s")
	}
	return clientv3.WatchResponse{}
}

// A waiter on a shared watch may be passed a deletion its read of the
// queue already saw (the watch's responses in flight when it joined): at
// or below the read's revision it is no news. An entry's name is reused,
// so such a deletion may name an entry alive again; counted, it would
// stand for the deletion still to come, which would then go unheard.
func TestHearIgnoresWhatTheReadSaw(t *testing.T) {
	t.Parallel()
	en := &entry{}
	wch := make(chan clientv3.WatchResponse, 2)
	deleted := func(rev int64) clientv3.WatchResponse {
		return clientv3.WatchResponse{Events: []*clientv3.Event{{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte("q/e"), ModRevision: rev}}}}
	}
	gone := func(*mvccpb.KeyValue) (bool, bool) { return true, true }
	wch <- deleted(100) // read at 100: seen
	wch <- deleted(101)
	h, err := en.hear(t.Context(), 100, wch, nil, gone)
	if err != nil || h.at != 101 {
		t.Fatalf("heard %+v (%v), want the deletion at 101 alone", h, err)
	}
}

// A waiter that queued near the head hears its predecessor go through the
// Locker's watch of the queue; one further back watches its predecessor
// alone, so that a long queue's deletions do not reach every Locker.
func TestNearHeadSharesTheQueueWatch(t *testing.T) {
	t.Parallel()
	_, d, _ := testLocker(t)
	r := &driver.Request{Key: "near-" + rand.Text()}
	pred := &mvccpb.KeyValue{Key: []byte(d.queue(driver.Plain, r.Key) + "p")}
	shared := func() int {
		d.waits.mu.Lock()
		defer d.waits.mu.Unlock()
		return len(d.waits.m)
	}
	far := &entry{d: d, r: r, ahead: nearHead + 1}
	_, leave := far.watchFor(t.Context(), pred)
	if n := shared(); n != 0 {
		t.Errorf("a waiter with %d entries before it set up %d shared watches, want none", far.ahead, n)
	}
	leave()
	near := &entry{d: d, r: r, ahead: nearHead}
	_, leave = near.watchFor(t.Context(), pred)
	if n := shared(); n != 1 {
		t.Errorf("a waiter with %d entries before it: %d shared watches, want 1", near.ahead, n)
	}
	leave()
}

// A waiter that does not take the watch's responses is dropped once 64
// wait for it (its channel closed: it would read the queue again), and a
// watch left with no waiter so ends after its linger like any other.
// etcd may pass a watch catching up several deletions in one response,
// so the test deletes until the waiter is dropped, within a bound.
func TestQueueWatchDropsAWaiterBehind(t *testing.T) {
	t.Parallel()
	_, d, c := testLocker(t)
	d.waits.linger = 50 * time.Millisecond
	ctx := t.Context()
	q := d.queue(driver.Plain, "behind-"+rand.Text())
	wch, leave := d.listen(q)
	defer leave()
	listening := func() bool {
		d.waits.mu.Lock()
		defer d.waits.mu.Unlock()
		w := d.waits.m[q]
		return w != nil && len(w.subs) > 0
	}
	for i := 0; listening(); i++ {
		if i == 1000 {
			t.Fatal("a waiter that took none of 1000 deletions is still given them")
		}
		k := q + strconv.Itoa(i)
		if _, err := c.Put(ctx, k, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for range wch { // what it was given, then closed (it was dropped)
		got++
	}
	if got > 64 {
		t.Fatalf("%d responses given to a waiter that took none, want at most 64", got)
	}
	waitNoWatch(t, d)
}

// waitNoWatch waits until d has no shared watch left.
func waitNoWatch(t *testing.T, d *etcdDriver) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d.waits.mu.Lock()
		left := len(d.waits.m)
		d.waits.mu.Unlock()
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a queue's watch outlived its linger by 10 s")
		}
		time.Sleep(time.Millisecond) // polling a condition: the linger's timer has no channel
	}
}
