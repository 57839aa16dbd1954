package redsync

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// commandsRun is how many commands c's server has run, scripts' own
// included; PEXPIRE's left out, which a script sends when a key's expiry
// is behind the clock by a millisecond or more.
func commandsRun(t *testing.T, c goredis.UniversalClient) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	return testenv.RedisCommands(info, "pexpire")
}

// What a grant or a refusal costs a master grows with the holders that
// could refuse it, never with the compatible ones: the same commands
// beside 1,000 intention holders of a subtree's top node as beside one.
func TestCostIgnoresCompatibleHolders(t *testing.T) {
	testenv.URL(t, "LOCKER_TEST_REDLOCK") // -short skips
	var clients []goredis.UniversalClient
	for range 3 {
		s := testenv.StartRedis(t, 0)
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	d, err := newDriver(clients, WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	ctx := context.Background()
	request := func(m driver.Mode) *driver.Request {
		return &driver.Request{Key: "top", Space: driver.Subtree, Mode: m, Owner: rand.Text(), ID: rand.Text(), TTL: time.Minute}
	}
	take := func(m driver.Mode) driver.Hold {
		g, err := d.Acquire(ctx, request(m))
		if err != nil || g.Hold == nil {
			t.Fatalf("Acquire(%v) = %+v, %v", m, g, err)
		}
		return g.Hold
	}
	// cost is what master 0 runs for an IX grant and release, an X
	// refusal, and an IS grant. Each step waits for the work left in the
	// background (a fence claim; a master's reply that came after a
	// quorum decided, and the release sent once it came), so that each
	// meets the same state.
	cost := func() int64 {
		d.bg.Wait()
		before := commandsRun(t, clients[0])
		if err := take(driver.IntentExclusive).Release(ctx); err != nil {
			t.Fatal(err)
		}
		d.bg.Wait()
		if g, err := d.Acquire(ctx, request(driver.Exclusive)); err != nil || g.Hold != nil {
			t.Fatalf("exclusive Acquire beside intention holders = %+v, %v; want refused", g, err)
		}
		d.bg.Wait()
		_ = take(driver.IntentShared).Release(ctx)
		d.bg.Wait()
		return commandsRun(t, clients[0]) - before
	}
	take(driver.IntentExclusive)
	cost() // each script's first run sends it (EVAL)
	one := cost()
	for range 999 {
		take(driver.IntentExclusive)
	}
	if many := cost(); many != one {
		t.Errorf("beside 1,000 IX holders a master ran %d commands, beside one %d", many, one)
	}
}

// A release that hands the key to the next waiter costs each master the
// hand-off's own commands, none of the general path's reads: as many for
// the release of a hold that was itself handed over (its call's marks
// gone, its id one of those it pended) as for a plain one. (The general
// path ran 22 here, and made its helpers.) A waiter's refusal behind the
// holder costs no look at the mark it just placed.
func TestHandoffReleaseCost(t *testing.T) {
	testenv.URL(t, "LOCKER_TEST_REDLOCK") // -short skips
	var addrs []string
	for range 3 {
		addrs = append(addrs, testenv.StartRedis(t, 0).Addr)
	}
	var first goredis.UniversalClient
	open := func() *redlock {
		var cs []goredis.UniversalClient
		for _, a := range addrs {
			c := goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			cs = append(cs, c)
		}
		first = cs[0]
		d, err := newDriver(cs, WithNodeTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close(context.Background()) })
		return d
	}
	a, b, c := open(), open(), open()
	ctx := context.Background()
	// release releases h (its driver d) and reports what master 0 ran for
	// it, once the waiter rb, woken, took the key it was handed.
	release := func(d *redlock, h driver.Hold, waiter *redlock, rb *driver.Request, woken <-chan struct{}) (int64, driver.Hold) {
		d.bg.Wait()
		before := commandsRun(t, first)
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		d.bg.Wait()
		ran := commandsRun(t, first) - before
		<-woken
		return ran, take(t, waiter, rb).Hold
	}
	for round := range 2 { // the first round sends each script (EVAL)
		key := uniqueKey(t, fmt.Sprint("k", round))
		held := take(t, a, exclusive(key)).Hold
		rb, rc := exclusive(key), exclusive(key)
		wb := queueBehind(t, b, rb)
		woken, leave, err := c.Subscribe(ctx, rc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(leave)
		everyLive(t, c)
		before := commandsRun(t, first)
		if g, err := c.Acquire(ctx, rc); err != nil || g.Hold != nil {
			t.Fatalf("Acquire behind a holder and a waiter = %+v, %v; want refused", g, err)
		}
		c.bg.Wait()
		refused := commandsRun(t, first) - before
		plain, handedB := release(a, held, b, rb, wb)
		handed, handedC := release(b, handedB, c, rc, woken)
		if err := handedC.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			continue
		}
		// EVALSHA, TIME, HMGET, HGET (the call's marks), ZRANGE, ZSCORE,
		// HGET (the pended hold), INCR, HDEL, HSET, PTTL, 2 ZREM, HDEL,
		// PUBLISH; PEXPIRE uncounted.
		const want = 15
		if plain > want || handed > want {
			t.Errorf("a master ran %d commands for a release handing the key on, %d for the release of a handed hold; want at most %d", plain, handed, want)
		}
		// EVALSHA, TIME, HMGET, ZRANGE and ZSCORE (the first mark), 2
		// ZADD, 3 PTTL (the mark's keys), HSET and PTTL (the pending
		// hold): no look at the mark just placed.
		if refused > 12 {
			t.Errorf("a master ran %d commands for a refusal behind a holder and a waiter; want at most 12", refused)
		}
	}
}
