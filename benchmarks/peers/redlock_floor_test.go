package peers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// redlockGrant is the floor's release on one master: it writes the grant
// (the next waiter's, with the TTL) and publishes it to that waiter; the
// queued floor's also takes that waiter off the key's queue (KEYS[2]).
// redlockQueue is the queued floor's waiter joining that queue.
var (
	redlockGrant = goredis.NewScript(`
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
if KEYS[2] then redis.call('ZREM', KEYS[2], ARGV[4]) end
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1`)
	redlockQueue = goredis.NewScript(`
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`)
)

// redlockFloorClient is the least a FIFO hand-off through Redlock costs:
// the key's queue in the benchmark process (floorQueue), a release is one
// round, a script on every master at once that writes the grant and
// publishes it to the next waiter, returning once a quorum answered; the
// waiter, subscribed on every master, holds the key once a quorum of the
// grant's copies came. queued, each waiter also joins the key's queue on
// the masters, in one round at a quorum, as a waiter in another process
// must (ours: its refused attempt), and the release takes it off there:
// a FIFO Redlock's two rounds a hand-off, with nothing else on them.
func redlockFloorClient(tb testing.TB, addrs []string, queued bool) locker.Locker {
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
	queue := prefix + "redlock-floor:q" // written, never read: its cost is the point
	// round runs script on every master at once, returning once a quorum
	// ran it (the late ones' replies land in the buffer).
	round := func(ctx context.Context, script *goredis.Script, keys []string, args ...any) error {
		replies := make(chan error, len(clients))
		for _, c := range clients {
			go func() { replies <- script.Run(ctx, c, keys, args...).Err() }()
		}
		var errs []error
		for ran := 0; ran < quorum; {
			if err := <-replies; err != nil {
				if errs = append(errs, err); len(errs) > len(clients)-quorum {
					return fmt.Errorf("redlock floor: no quorum: %w", errors.Join(errs...))
				}
				continue
			}
			ran++
		}
		return nil
	}
	return floorClient(floorSignal{
		id: id,
		arm: func(ctx context.Context) (func(context.Context) error, error) {
			if queued {
				if err := round(ctx, redlockQueue, []string{queue}, id, time.Now().UnixMicro(), ttl.Milliseconds()); err != nil {
					return nil, err
				}
			}
			return receive(granted), nil
		},
		send: func(ctx context.Context, next string) error {
			g := id + "." + strconv.FormatUint(grants.Add(1), 10)
			keys := []string{channel(next)}
			if queued {
				keys = append(keys, queue)
			}
			return round(ctx, redlockGrant, keys, channel(next), g, ttl.Milliseconds(), next)
		},
	})
}

// oneScript is the least script a master runs: it returns 1.
var oneScript = goredis.NewScript(`return 1`)

// BenchmarkRedlockRounds is the least a Redlock lock and unlock cost here,
// the bound of issue #22's uncontended goal (4× one master's round trip):
// two rounds, each the least script sent to every master at once and done
// at a quorum's answers, timed against a PING to the first master as
// conformance.Bench's Uncontended times a lock+unlock (rtt-x). Any Redlock
// takes a quorum in one round and gives it back in another; a lock does
// more in each script (ours: its queue, fence and TTL).
func BenchmarkRedlockRounds(b *testing.B) {
	u := testenv.URL(b, "LOCKER_TEST_REDLOCK")
	addrs := strings.Split(u.Host, ",")
	clients := make([]*goredis.Client, len(addrs))
	for i, a := range addrs {
		clients[i] = goredis.NewClient(&goredis.Options{Addr: a})
		cleanup(b, clients[i].Close)
	}
	ctx, quorum := context.Background(), len(addrs)/2+1
	round := func() {
		answers := make(chan error, len(clients))
		for _, c := range clients {
			go func() { answers <- oneScript.Run(ctx, c, nil).Err() }()
		}
		for range quorum {
			if err := <-answers; err != nil {
				b.Fatal(err)
			}
		}
	}
	round() // the script loaded on every master
	var rounds, rtt time.Duration
	for b.Loop() {
		t0 := time.Now()
		round()
		round()
		rounds += time.Since(t0)
		b.StopTimer()
		t1 := time.Now()
		if err := clients[0].Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		rtt += time.Since(t1)
		b.StartTimer()
	}
	b.ReportMetric(float64(rounds)/float64(rtt), "rtt-x")
}
