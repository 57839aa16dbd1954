package etcd

import (
	"context"
	"errors"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/backoff"
)

var _ driver.Watcher = (*etcdDriver)(nil)

// Watches (locker.Observe). Every grant, release and end of a holder of a
// key writes or deletes an entry of its queue (an entry put, its hold set
// rewritten or deleted; an etcd lease that expires or is revoked deletes
// its entries), so an etcd watch of the queue's prefix hears them all: the
// driver needs no driver.Announcer. A waiter's entry signals too, a change
// of the queue if not of its holders.

// errWatchClosed: a watch's channel closed before etcd confirmed it.
var errWatchClosed = errors.New("locker/etcd: watch closed before it was created")

// watchRetry spaces the attempts to set a broken watch up again.
var watchRetry = backoff.Policy{Min: 50 * time.Millisecond, Max: 2 * time.Second, Jitter: true}

// queueWatch follows one key's queue for Watch.
type queueWatch struct {
	d       *etcdDriver
	prefix  string // the key's queue: prefix + escape(key) + "/"
	changed chan struct{}
}

// Watch watches key's queue (d.queue: every entry of key, and only of
// key, lies under it) and returns once etcd has confirmed the watch, so
// that every write to the queue after Watch returns is reported. A watch
// that breaks (a compaction, a member without a leader) is set up again
// with backoff, and signals once it is: the read that prompts then misses
// nothing, the new watch covering whatever comes after. It ends at stop,
// or when the Locker closes.
func (d *etcdDriver) Watch(ctx context.Context, space driver.Space, key string) (<-chan struct{}, func(), error) {
	if d.ctx.Err() != nil {
		return nil, nil, locker.ErrClosed
	}
	w := d.queueWatch(space, key)
	life, end := context.WithCancel(d.ctx)
	wch, cancel, err := w.open(ctx, life)
	if err != nil {
		end()
		return nil, nil, d.fail(ctx, key, err)
	}
	return w.changed, w.start(life, end, wch, cancel), nil
}

// queueWatch is a watch of key's queue, not yet started.
func (d *etcdDriver) queueWatch(space driver.Space, key string) *queueWatch {
	return &queueWatch{d: d, prefix: d.queue(space, key), changed: make(chan struct{}, 1)}
}

// start follows wch (cancel ends it) in a goroutine of its own until life
// ends; the stop it returns ends life (end) and waits for the goroutine.
func (w *queueWatch) start(life context.Context, end context.CancelFunc, wch clientv3.WatchChan, cancel context.CancelFunc) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(life, wch, cancel)
	}()
	return sync.OnceFunc(func() {
		end()
		<-done
	})
}

// open starts a watch of the queue, living until life ends or cancel is
// called, and returns once etcd has created it; ctx (and the request
// timeout) bound the wait.
func (w *queueWatch) open(ctx, life context.Context) (clientv3.WatchChan, context.CancelFunc, error) {
	rctx, rcancel := w.d.rpc(ctx)
	defer rcancel()
	wctx, cancel := context.WithCancel(w.d.watchCtx(life))
	wch := w.d.client.Watch(wctx, w.prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	var err error
	select {
	case resp, ok := <-wch:
		switch {
		case !ok:
			err = errWatchClosed
		case resp.Err() != nil:
			err = resp.Err()
		case !resp.Created: // etcd sends the creation first
			err = errWatchClosed
		}
	case <-rctx.Done():
		err = rctx.Err()
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return wch, cancel, nil
}

// run signals each change the watch wch reports until life ends, setting
// the watch up again each time it breaks.
func (w *queueWatch) run(life context.Context, wch clientv3.WatchChan, cancel context.CancelFunc) {
	for {
		w.follow(life, wch)
		cancel()
		if life.Err() != nil {
			return
		}
		if !backoff.Retry(life, watchRetry, func(ctx context.Context) bool {
			var err error
			wch, cancel, err = w.open(ctx, life)
			return err == nil
		}) {
			return
		}
		w.signal() // what changed while it was broken was not reported
	}
}

// follow signals each change wch reports; it returns when life ends or
// the watch breaks (its channel closed, canceled or in error).
func (w *queueWatch) follow(life context.Context, wch clientv3.WatchChan) {
	for {
		select {
		case <-life.Done():
			return
		case resp, ok := <-wch:
			if !ok || resp.Canceled || resp.Err() != nil {
				return
			}
			if len(resp.Events) > 0 {
				w.signal()
			}
		}
	}
}

// signal sends on changed unless a signal is pending already.
func (w *queueWatch) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}
