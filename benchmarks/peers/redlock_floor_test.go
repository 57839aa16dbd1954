package peers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
)

// redlockGrant is the floor's release on one master: it writes the grant
// (the next waiter's, with the TTL) and publishes it to that waiter.
var redlockGrant = goredis.NewScript(`
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1`)

// redlockFloorClient is the least a FIFO hand-off through Redlock costs:
// the key's queue in the benchmark process (floorQueue), a release is one
// round, a script on every master at once that writes the grant and
// publishes it to the next waiter, returning once a quorum answered; the
// waiter, subscribed on every master, holds the key once a quorum of the
// grant's copies came. Ours takes a round more on that path: the waiter's
// own attempt, after a quorum of the release's copies woke it.
func redlockFloorClient(tb testing.TB, addrs []string) locker.Locker {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, quorum := fmt.Sprint(rand.Uint64()), len(addrs)/2+1
	channel := func(id string) string { return prefix + "redlock-floor:w:" + id }
	clients := make([]*goredis.Client, len(addrs))
	subs := make([]*goredis.PubSub, len(addrs))
	copies := make(chan string, 64)
	var readers sync.WaitGroup
	for i, a := range addrs {
		clients[i] = goredis.NewClient(&goredis.Options{Addr: a})
		subs[i] = clients[i].Subscribe(ctx, channel(id))
		if _, err := subs[i].Receive(ctx); err != nil { // subscribed before any Lock
			tb.Fatal(err)
		}
		readers.Go(func() {
			for m := range subs[i].Channel() {
				copies <- m.Payload
			}
		})
	}
	granted := make(chan struct{}, 1)
	counted := make(chan struct{})
	go func() {
		defer close(counted)
		heard := map[string]int{} // copies of each grant
		for g := range copies {
			switch heard[g]++; heard[g] {
			case quorum:
				granted <- struct{}{}
			case len(addrs):
				delete(heard, g)
			}
		}
	}()
	tb.Cleanup(func() {
		for i := range clients {
			_ = subs[i].Close()
		}
		readers.Wait()
		close(copies)
		<-counted
		for _, c := range clients {
			_ = c.Close()
		}
	})
	var grants atomic.Uint64
	return floorClient(floorSignal{
		id:  id,
		arm: func(context.Context) (func(context.Context) error, error) { return receive(granted), nil },
		send: func(ctx context.Context, next string) error {
			g := id + "." + strconv.FormatUint(grants.Add(1), 10)
			replies := make(chan error, len(clients)) // the late ones land here
			for _, c := range clients {
				go func() {
					replies <- redlockGrant.Run(ctx, c, []string{channel(next)}, channel(next), g, ttl.Milliseconds()).Err()
				}()
			}
			var errs []error
			for granted := 0; granted < quorum; {
				if err := <-replies; err != nil {
					if errs = append(errs, err); len(errs) > len(clients)-quorum {
						return fmt.Errorf("redlock floor: no quorum granted: %w", errors.Join(errs...))
					}
					continue
				}
				granted++
			}
			return nil
		},
	})
}
