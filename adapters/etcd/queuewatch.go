package etcd

import (
	"context"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A Locker's waiters near the head of a key's queue share one etcd watch
// of the queue (its entries' deletions, and their writes: a rewrite tells
// a waiter that counts off the queue to read, waitturn.go), kept a while
// after the last of them leaves (linger), rather than each setting up a
// watch of its own for its wait.
// etcd starts a watch with no revision from the one it read as the
// request came in; a write landing before the watcher is registered
// leaves it "unsynced", served by a loop that runs every 100 ms. Under
// contention one new watch in fifty or so met that here, and a waiter
// whose predecessor went within those 100 ms heard it late (measured
// alone: a watch per wait, 8 clients, p99 77 ms from a delete's reply to
// its event; one watch per client, 0.7 ms). A shared watch pays that once.
// But every change of the queue reaches every Locker with such a watch,
// so only a waiter that queued with at most nearHead entries before it
// uses one (its wait is short: the late service would matter); one
// further back watches its predecessor alone, whose watch is served in
// time long before the predecessor's turn ends (with a shared watch for
// all, 64 Lockers on one key fell from 260 to 100 hand-offs a second). A
// semaphore's waiter, which hears every deletion of its queue anyway,
// always uses it.

// The Lockers that Open made in one process on one URL (but for its path)
// share a client (clients, open.go) and with it these watches: a queue's
// change then reaches the process once, where a watch per Locker brought
// it once to each, every one a stream the server serves on the hand-off's
// path (8 Lockers of a process contending on one key: 602–630 hand-offs a
// second with a client each, 654–684 sharing one). A shared watch belongs
// to the client, not to the Locker that set it up: it ends after its
// linger, or when it breaks, or with the client after the last Locker.
// A Locker made by New keeps its watches to itself.

// nearHead is how many entries may be before a waiter that uses the
// Locker's watch of the queue.
const nearHead = 8

// linger is how long a queue's watch outlives its last waiter, so that a
// key waited for again and again keeps one watch.
const linger = time.Second

// waitWatches are a Locker's shared watches, by queue prefix, or those
// of the Lockers that share a client (clients, open.go).
type waitWatches struct {
	mu     sync.Mutex
	m      map[string]*waitWatch
	linger time.Duration // linger, or a test's
	// ctx and run are the watches' context and the group that runs them:
	// the Locker's own (its ctx and sweeper, which its Close ends and
	// waits for), or, shared, the client's, which end after its last Locker.
	ctx context.Context
	run *sync.WaitGroup
}

// waitWatch is one watch of a queue's changes, and the waiters hearing it.
type waitWatch struct {
	ww     *waitWatches
	prefix string
	cancel context.CancelFunc
	subs   map[chan clientv3.WatchResponse]struct{}
	// created: etcd confirmed the watch; last: the highest revision it
	// reported (its creation's, then its events'), each response up to
	// which has gone to every waiter listening then
	created bool
	last    int64
	idle    *time.Timer // ends the watch once nobody listens (linger)
}

// listen returns a channel of the responses of a watch of prefix's
// changes, as a watch of its own made now would give it: a creation
// notice first (once etcd confirmed the watch: with the highest revision
// it reported, so that a waiter that read the queue before that revision
// reads again), then each change. The channel closes when the watch
// breaks, or when the waiter fell behind; leave ends the waiter's part.
func (d *etcdDriver) listen(prefix string) (wch clientv3.WatchChan, leave func()) {
	d.waits.mu.Lock()
	defer d.waits.mu.Unlock()
	w := d.waits.m[prefix]
	if w == nil {
		w = d.watchQueue(prefix)
	}
	ch := make(chan clientv3.WatchResponse, 64)
	w.subs[ch] = struct{}{}
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
	}
	if w.created {
		ch <- clientv3.WatchResponse{Header: &etcdserverpb.ResponseHeader{Revision: w.last}, Created: true}
	}
	return ch, func() { w.leave(ch) }
}

// watchQueue starts a shared watch of prefix. Callers hold d.waits.mu.
func (d *etcdDriver) watchQueue(prefix string) *waitWatch {
	if d.waits.m == nil {
		d.waits.m = map[string]*waitWatch{}
	}
	ctx, cancel := context.WithCancel(d.watchCtx(d.waits.ctx))
	w := &waitWatch{ww: d.waits, prefix: prefix, cancel: cancel, subs: map[chan clientv3.WatchResponse]struct{}{}}
	d.waits.m[prefix] = w
	d.waits.run.Go(func() { // waited for as its ctx ends (see waitWatches)
		// Watch blocks while the client has no stream (etcd out of
		// reach): not in a waiter's call, whose ctx would not end it.
		w.serve(d.client.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify()))
	})
	return w
}

// serve passes each response of wch on to the waiters until the watch
// ends, then closes their channels.
func (w *waitWatch) serve(wch clientv3.WatchChan) {
	for resp := range wch {
		if resp.Canceled || resp.Err() != nil {
			break
		}
		w.pass(resp)
	}
	w.cancel()
	w.ww.mu.Lock()
	defer w.ww.mu.Unlock()
	if w.ww.m[w.prefix] == w {
		delete(w.ww.m, w.prefix)
	}
	for ch := range w.subs {
		close(ch)
	}
	w.subs = nil
}

// pass records resp's revision and gives resp to every waiter; one that
// has not taken the last 64 is dropped (its channel closed: it starts
// over, reading the queue).
func (w *waitWatch) pass(resp clientv3.WatchResponse) {
	w.ww.mu.Lock()
	defer w.ww.mu.Unlock()
	if resp.Created && resp.Header != nil {
		w.created = true
		w.last = max(w.last, resp.Header.Revision)
	}
	for _, ev := range resp.Events {
		w.last = max(w.last, ev.Kv.ModRevision)
	}
	for ch := range w.subs {
		select {
		case ch <- resp:
		default:
			delete(w.subs, ch)
			close(ch)
		}
	}
	w.idleIfEmpty()
}

// leave drops the waiter ch.
func (w *waitWatch) leave(ch chan clientv3.WatchResponse) {
	w.ww.mu.Lock()
	defer w.ww.mu.Unlock()
	if _, ok := w.subs[ch]; !ok {
		return
	}
	delete(w.subs, ch)
	w.idleIfEmpty()
}

// idleIfEmpty starts the linger once the watch has no waiter left (the
// last left, or fell behind). Callers hold w.ww.mu.
func (w *waitWatch) idleIfEmpty() {
	if len(w.subs) > 0 || w.idle != nil || w.ww.m[w.prefix] != w {
		return
	}
	w.idle = time.AfterFunc(w.ww.lingering(), func() {
		w.ww.mu.Lock()
		defer w.ww.mu.Unlock()
		if len(w.subs) == 0 && w.ww.m[w.prefix] == w {
			delete(w.ww.m, w.prefix)
			w.cancel() // serve ends
		}
	})
}

func (ww *waitWatches) lingering() time.Duration {
	if ww.linger > 0 {
		return ww.linger
	}
	return linger
}
