package peers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"testing"

	"github.com/locker-go/locker"
)

// notifyFloor is the in-process FIFO that pg-notify-floor's clients of
// one run share, by key: who holds it, and who waits, in order.
var notifyFloor = struct {
	sync.Mutex
	held    map[string]bool
	waiters map[string][]string
}{held: map[string]bool{}, waiters: map[string][]string{}}

// notifyFloorClient is the least a hand-off through Postgres's NOTIFY can
// cost, a bound for ours, not a lock: the key's state and queue live in
// this process, and a release only sends the next waiter, LISTENing on a
// connection of its own, one NOTIFY in one autocommitted statement. Ours
// hands the key over the same way (its release grants the next waiter in
// the database and NOTIFYs it), with the lock's rows besides.
func notifyFloorClient(tb testing.TB, u *url.URL) locker.Locker {
	ctx := context.Background()
	id := fmt.Sprintf("peers_floor_%d", rand.Uint64())
	stmts, listen := pgConn(tb, u), pgConn(tb, u)
	if _, err := listen.Exec(ctx, "LISTEN "+id); err != nil {
		tb.Fatal(err)
	}
	granted := make(chan struct{}, 1)
	lctx, stop := context.WithCancel(ctx)
	var done sync.WaitGroup
	done.Go(func() {
		for {
			if _, err := listen.WaitForNotification(lctx); err != nil {
				return
			}
			granted <- struct{}{}
		}
	})
	tb.Cleanup(func() { stop(); done.Wait() }) // before pgConn's Close
	return shim{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			f := &notifyFloor
			f.Lock()
			if !f.held[key] {
				f.held[key] = true
				f.Unlock()
			} else {
				f.waiters[key] = append(f.waiters[key], id)
				f.Unlock()
				select {
				case <-granted:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return func(ctx context.Context) error {
				f.Lock()
				q := f.waiters[key]
				if len(q) == 0 {
					f.held[key] = false
					f.Unlock()
					return nil
				}
				next := q[0]
				f.waiters[key] = q[1:]
				f.Unlock()
				_, err := stmts.Exec(ctx, "SELECT pg_notify($1, '')", next)
				return err
			}, nil
		},
		close: func() error { return nil },
	}
}
