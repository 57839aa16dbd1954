package zookeeper

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/backoff"
)

// A key's holders and waiters are the children of its key node, so a
// children watch on that node fires at every grant (a predecessor's node
// deleted), release and session expiry of a holder. A ZooKeeper watch
// fires once: one goroutine per Watch sets it again after each event, and
// only then signals, so that a change between the event and the new watch
// is read by the observer all the same. While the key node does not exist
// (never locked, or reaped as an empty container) an exists-watch waits
// for its creation instead.
//
// A watch cannot be removed (go-zookeeper keeps its channel until it
// fires): the watch set when a Watch stops is parked, for the next Watch
// of the same key node to take over, so that Observe called again and
// again on a quiet election does not pile them up.

// watchRetry spaces the attempts to set a watch again after the session
// expired or the connection failed.
var watchRetry = backoff.Policy{Min: 20 * time.Millisecond, Max: time.Second, Jitter: true}

// keyWatch is one Watch: the key node at path, watched on session s.
type keyWatch struct {
	s       *session
	path    string
	changed chan struct{} // buffers one signal
}

// Watch signals each change of the queue of key in space (see
// driver.Watcher), through a watch on the Locker's primary session, which
// go-zookeeper sets again on a new connection within the session; after
// the session expired it is set anew on the session that follows, and a
// signal says that changes may have been missed.
func (z *zkDriver) Watch(ctx context.Context, space driver.Space, key string) (<-chan struct{}, func(), error) {
	if z.ctx.Err() != nil {
		return nil, nil, locker.ErrClosed
	}
	w := &keyWatch{s: z.primary, path: z.parent(space, key), changed: make(chan struct{}, 1)}
	events := z.unpark(w.path)
	if events == nil {
		var err error
		if events, err = w.arm(ctx); err != nil {
			return nil, nil, backendErr("watch key", err)
		}
	}
	wctx, cancel := context.WithCancel(z.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if left := w.run(wctx, events); left != nil {
			z.park(w.path, left)
		}
	}()
	stop := func() {
		cancel()
		<-done
	}
	return w.changed, stop, nil
}

// arm sets the watch: on the key node's children, or, while the node does
// not exist, on its creation. It returns the watch's event channel.
func (w *keyWatch) arm(ctx context.Context) (<-chan zk.Event, error) {
	return ask(ctx, w.s, func() (<-chan zk.Event, error) {
		for {
			_, _, ch, err := w.s.conn.ChildrenW(w.path)
			if !errors.Is(err, zk.ErrNoNode) {
				return ch, err
			}
			exists, _, ch, err := w.s.conn.ExistsW(w.path)
			if err != nil || !exists {
				return ch, err
			}
			// Made meanwhile: watch its children. (The data watch that
			// ExistsW set fires unread one day: go-zookeeper buffers it.)
		}
	})
}

// run sets the watch again after each of its events, then signals, until
// ctx ends (stop, or the Locker closed) or the connection is closed. It
// returns the watch it leaves set, if any.
func (w *keyWatch) run(ctx context.Context, events <-chan zk.Event) (left <-chan zk.Event) {
	for {
		var ev zk.Event
		select {
		case <-ctx.Done():
			return events
		case ev = <-events:
		}
		if errors.Is(ev.Err, zk.ErrClosing) {
			return nil // the connection is closed for good
		}
		// EventNotWatching (the session expired) or a change: set it again,
		// on the connection's current session, with backoff while it fails.
		if !backoff.Retry(ctx, watchRetry, func(ctx context.Context) bool {
			var err error
			events, err = w.arm(ctx)
			return err == nil
		}) {
			return nil
		}
		w.signal()
	}
}

// park keeps events, the watch a stopped Watch left set on the key node
// at path, unless one is parked there already (the second then fires
// unread one day). It forgets the parked watches that have fired: go-
// zookeeper no longer holds them, and a new one costs the same round trip
// as one found fired.
func (z *zkDriver) park(path string, events <-chan zk.Event) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.parked == nil {
		z.parked = map[string]<-chan zk.Event{}
	}
	for p, ch := range z.parked {
		if len(ch) > 0 {
			delete(z.parked, p)
		}
	}
	if _, ok := z.parked[path]; !ok {
		z.parked[path] = events
	}
}

// unpark takes the watch parked on path, nil if none. It may have fired
// since (or the session expired): run then sets it again and signals,
// as for any event. Until it fires it is as good as one set now.
func (z *zkDriver) unpark(path string) <-chan zk.Event {
	z.mu.Lock()
	defer z.mu.Unlock()
	events := z.parked[path]
	delete(z.parked, path)
	return events
}

// signal sends on changed unless a signal is pending.
func (w *keyWatch) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}
