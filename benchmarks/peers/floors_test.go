package peers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"testing"

	"github.com/go-zookeeper/zk"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
)

// The hand-off floors are bounds, not locks: the least a hand-off through
// a backend's own notification costs here, with nothing else on the path.
// The key's state and queue live in the benchmark process (floorQueue),
// and a release only signals the next waiter through the backend, which
// wakes it: one statement or write, and one notification. Each of ours
// hands the key over through the same notification, with its lock's
// records besides; where ours is short of the ceiling, its floor shows
// what any such lock pays on this machine.

// floorQueue is the in-process FIFO that a floor's clients share, by key
// (unique to each benchmark): who holds it, and who waits, in order.
var floorQueue = struct {
	sync.Mutex
	held    map[string]bool
	waiters map[string][]string
}{held: map[string]bool{}, waiters: map[string][]string{}}

// floorSignal is one client's hand-off signal through a backend.
type floorSignal struct {
	id string
	// arm makes ready to hear a signal sent to id from now on, and returns
	// the wait for it.
	arm func(ctx context.Context) (wait func(ctx context.Context) error, err error)
	// send signals waiter next.
	send func(ctx context.Context, next string) error
	// enter, if set, begins every Lock (a floor whose every holder has a
	// place in the backend makes it there); alone, if set, is a release's
	// when nobody waits.
	enter, alone func(ctx context.Context) error
}

// floorClient is a client of a hand-off floor over s.
func floorClient(s floorSignal) locker.Locker {
	f := &floorQueue
	return shim{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			if s.enter != nil {
				if err := s.enter(ctx); err != nil {
					return nil, err
				}
			}
			f.Lock()
			if !f.held[key] {
				f.held[key] = true
				f.Unlock()
			} else {
				f.Unlock()
				wait, err := s.arm(ctx)
				if err != nil {
					return nil, err
				}
				f.Lock()
				if !f.held[key] { // released while we armed
					f.held[key] = true
					f.Unlock()
				} else {
					f.waiters[key] = append(f.waiters[key], s.id)
					f.Unlock()
					if err := wait(ctx); err != nil {
						return nil, err
					}
				}
			}
			return func(ctx context.Context) error {
				f.Lock()
				q := f.waiters[key]
				if len(q) == 0 {
					f.held[key] = false
					f.Unlock()
					if s.alone != nil {
						return s.alone(ctx)
					}
					return nil
				}
				f.waiters[key] = q[1:]
				f.Unlock()
				return s.send(ctx, q[0])
			}, nil
		},
		close: func() error { return nil },
	}
}

// notifyFloorClient signals through Postgres: the waiter LISTENs on a
// channel of its own, on a connection of its own; a release sends it one
// pg_notify in one autocommitted statement.
func notifyFloorClient(tb testing.TB, u *url.URL) locker.Locker {
	id := fmt.Sprintf("peers_floor_%d", rand.Uint64())
	stmts, listen := pgConn(tb, u), pgConn(tb, u)
	if _, err := listen.Exec(context.Background(), "LISTEN "+id); err != nil {
		tb.Fatal(err)
	}
	granted := make(chan struct{}, 1)
	ctx, stop := context.WithCancel(context.Background())
	var done sync.WaitGroup
	done.Go(func() {
		for {
			if _, err := listen.WaitForNotification(ctx); err != nil {
				return
			}
			granted <- struct{}{}
		}
	})
	tb.Cleanup(func() { stop(); done.Wait() }) // before pgConn's Close
	return floorClient(floorSignal{
		id:  id,
		arm: func(context.Context) (func(context.Context) error, error) { return receive(granted), nil },
		send: func(ctx context.Context, next string) error {
			_, err := stmts.Exec(ctx, "SELECT pg_notify($1, '')", next)
			return err
		},
	})
}

// zkFloorClient signals through ZooKeeper: the waiter watches a node of
// its own (GetW); a release writes to it (Set), and the watch fires.
func zkFloorClient(tb testing.TB, server string) locker.Locker {
	c := zkConn(tb, server)
	node := func(id string) string { return zkRoot + "-floor-" + id }
	id := fmt.Sprint(rand.Uint64())
	if _, err := c.Create(node(id), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Delete(node(id), -1) })
	return floorClient(floorSignal{
		id: id,
		arm: func(context.Context) (func(context.Context) error, error) {
			_, _, ch, err := c.GetW(node(id))
			if err != nil {
				return nil, err
			}
			return zkEvent(ch), nil
		},
		send: func(_ context.Context, next string) error {
			_, err := c.Set(node(next), nil, -1)
			return err
		},
	})
}

// zkEvent waits for the watch's event on ch.
func zkEvent(ch <-chan zk.Event) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case ev := <-ch:
			return ev.Err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// zkQueuedFloorClient is zkFloorClient with each waiter's place in
// ZooKeeper, as a lock whose queue lives there keeps it: a refused waiter
// creates its node (one write, kept if a Lock that found the key free as
// it armed left it there) and watches it, and a release deletes the next
// waiter's node (one write), which that watch hears. Two writes a
// hand-off, as ours makes (the waiter's node created, the holder's
// deleted); the watch floor makes one.
func zkQueuedFloorClient(tb testing.TB, server string) locker.Locker {
	c := zkConn(tb, server)
	node := zkRoot + "-qfloor-" + fmt.Sprint(rand.Uint64())
	return floorClient(floorSignal{
		id: node,
		arm: func(context.Context) (func(context.Context) error, error) {
			_, err := c.Create(node, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return nil, err
			}
			_, _, ch, err := c.ExistsW(node)
			if err != nil {
				return nil, err
			}
			return zkEvent(ch), nil
		},
		send: func(_ context.Context, next string) error { return c.Delete(next, -1) },
	})
}

// etcdFloorClient signals through etcd: the waiter watches a key of its
// own; a release puts it (one raft write), and the watch hears it.
func etcdFloorClient(tb testing.TB, endpoint string) locker.Locker {
	c := etcdClient(tb, endpoint)
	key := func(id string) string { return "/" + prefix + "floor/" + id }
	id := fmt.Sprint(rand.Uint64())
	granted := etcdSignals(tb, c, key(id), clientv3.EventTypePut)
	return floorClient(floorSignal{
		id:  id,
		arm: func(context.Context) (func(context.Context) error, error) { return receive(granted), nil },
		send: func(ctx context.Context, next string) error {
			_, err := c.Put(ctx, key(next), "")
			return err
		},
	})
}

// etcdQueuedFloorClient is etcdFloorClient with each waiter's place in
// etcd, as a lock whose queue lives there keeps it: a refused waiter puts
// its key (one raft write) before it waits, and a release deletes the
// next waiter's key (one raft write), which its watch hears. Two writes a
// hand-off, as ours makes (a queue entry and its deletion); the floor
// makes one.
func etcdQueuedFloorClient(tb testing.TB, endpoint string) locker.Locker {
	c := etcdClient(tb, endpoint)
	key := func(id string) string { return "/" + prefix + "qfloor/" + id }
	id := fmt.Sprint(rand.Uint64())
	granted := etcdSignals(tb, c, key(id), clientv3.EventTypeDelete)
	return floorClient(floorSignal{
		id: id,
		arm: func(ctx context.Context) (func(context.Context) error, error) {
			if _, err := c.Put(ctx, key(id), ""); err != nil {
				return nil, err
			}
			return receive(granted), nil
		},
		send: func(ctx context.Context, next string) error {
			_, err := c.Delete(ctx, key(next))
			return err
		},
	})
}

// etcdInboxFloorClient is the least an etcd lock costs whose release is
// owner-checked and hands the key over in its own txn, and whose waiters
// hear their turn on a long-lived watch of their client's own (a watch
// made for each wait may start in etcd's unsynced path, served every
// 100 ms): each Lock puts its place (one raft write, as a lock's queue
// entry), and a release is one txn that checks the holder's place is its
// own (its create revision), deletes it, and puts the next waiter's
// inbox key, which only that waiter's watch hears. Two writes a hand-off,
// one of them a txn with a compare, as any lock with owner-checked
// release makes; one event on the hand-off's path.
func etcdInboxFloorClient(tb testing.TB, endpoint string) locker.Locker {
	return etcdTxnFloorClient(tb, endpoint, false)
}

// etcdFanoutFloorClient is etcdInboxFloorClient with each client watching
// the whole queue, as ours does (a waiter near the head hears the queue's
// changes through its Locker's watch of it, queuewatch.go): every place
// put and deleted reaches every client, the release's deletion on the
// hand-off's path among them.
func etcdFanoutFloorClient(tb testing.TB, endpoint string) locker.Locker {
	return etcdTxnFloorClient(tb, endpoint, true)
}

// etcdTxnFloorClient is etcdInboxFloorClient's, or with fanout
// etcdFanoutFloorClient's.
func etcdTxnFloorClient(tb testing.TB, endpoint string, fanout bool) locker.Locker {
	c := etcdClient(tb, endpoint)
	id := fmt.Sprint(rand.Uint64())
	queue := "/" + prefix + "tfloor/q/"
	place, inbox := queue+id, func(id string) string { return "/" + prefix + "tfloor/in/" + id }
	granted := etcdSignals(tb, c, inbox(id), clientv3.EventTypePut)
	var created int64 // the create revision of this client's place (one Lock at a time)
	mine := func() clientv3.Cmp { return clientv3.Compare(clientv3.CreateRevision(place), "=", created) }
	l := floorClient(floorSignal{
		id: id,
		enter: func(ctx context.Context) error {
			put, err := c.Put(ctx, place, "")
			if err == nil {
				created = put.Header.Revision
			}
			return err
		},
		arm: func(context.Context) (func(context.Context) error, error) { return receive(granted), nil },
		send: func(ctx context.Context, next string) error {
			_, err := c.Txn(ctx).If(mine()).Then(clientv3.OpDelete(place), clientv3.OpPut(inbox(next), "")).Commit()
			return err
		},
		alone: func(ctx context.Context) error {
			_, err := c.Txn(ctx).If(mine()).Then(clientv3.OpDelete(place)).Commit()
			return err
		},
	}).(shim)
	if fanout { // every change of the queue reaches every client, as ours
		ctx, stop := context.WithCancel(context.Background())
		tb.Cleanup(stop)
		all := c.Watch(ctx, queue, clientv3.WithPrefix())
		go func() {
			for range all {
			}
		}()
		l.close = func() error { stop(); return nil } // a closed client's watch stops hearing the queue
	}
	return l
}

// etcdSignals watches key, heard from its return on, and signals each of
// its events of type t on the channel returned; the watch ends with tb.
func etcdSignals(tb testing.TB, c *clientv3.Client, key string, t mvccpb.Event_EventType) <-chan struct{} {
	ctx, stop := context.WithCancel(context.Background())
	tb.Cleanup(stop)
	events := c.Watch(ctx, key, clientv3.WithCreatedNotify())
	if r := <-events; !r.Created {
		tb.Fatalf("etcd watch of %s: %v", key, r.Err())
	}
	granted := make(chan struct{}, 1)
	go func() {
		for r := range events {
			for _, ev := range r.Events {
				if ev.Type == t {
					granted <- struct{}{}
				}
			}
		}
	}()
	return granted
}

// receive is a wait for one signal on granted.
func receive(granted <-chan struct{}) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-granted:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// localWaiters are the wake-ups of the floors whose release wakes the
// next waiter in the process (rowFloorClient and its kin), by id.
var localWaiters sync.Map

// localWaiter is a new floor client's id and the channel by which
// wakeLocal wakes it, until tb ends.
func localWaiter(tb testing.TB) (string, <-chan struct{}) {
	id := fmt.Sprint(rand.Uint64())
	granted := make(chan struct{}, 1)
	localWaiters.Store(id, granted)
	tb.Cleanup(func() { localWaiters.Delete(id) })
	return id, granted
}

// wakeLocal wakes the floor client next (localWaiter).
func wakeLocal(next string) error {
	c, ok := localWaiters.Load(next)
	if !ok {
		return fmt.Errorf("floor client %s: gone", next)
	}
	c.(chan struct{}) <- struct{}{}
	return nil
}

// localFloor is a floor whose waiters are woken in the process
// (localWaiter's id and granted): place, if set, keeps a refused waiter's
// place in the backend before it waits; write records the next waiter as
// the key's holder as a release hands it over, and wake then wakes it.
type localFloor struct {
	id      string
	granted <-chan struct{}
	place   func(ctx context.Context) error
	write   func(ctx context.Context, next string) error
	wake    func(next string) error
}

// client is a client of the floor f.
func (f localFloor) client() locker.Locker {
	return floorClient(floorSignal{
		id: f.id,
		arm: func(ctx context.Context) (func(context.Context) error, error) {
			var err error
			if f.place != nil {
				err = f.place(ctx)
			}
			return receive(f.granted), err
		},
		send: func(ctx context.Context, next string) error {
			if err := f.write(ctx, next); err != nil {
				return err
			}
			return f.wake(next)
		},
	})
}
