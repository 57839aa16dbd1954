package redsync

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/driver"
)

// attemptCounter counts the acquire scripts a client sent.
type attemptCounter struct {
	commandHook
	n atomic.Int64
}

func (a *attemptCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if args := cmd.Args(); len(args) > 1 && (args[1] == acquireScript.Hash() || args[1] == acquireLua) {
			a.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// handoffDrivers are two drivers over the shared masters under one
// prefix of the test's own, the second's clients counting its attempts.
func handoffDrivers(t *testing.T) (holder, waiter *redlock, attempts []*attemptCounter, clients []goredis.UniversalClient) {
	t.Helper()
	prefix := fmt.Sprintf("test:%s:%d:", t.Name(), time.Now().UnixNano())
	open := func(count bool) *redlock {
		var cs []goredis.UniversalClient
		for _, a := range masterAddrs(t) {
			c := goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true})
			if count {
				ac := &attemptCounter{}
				c.AddHook(ac)
				attempts = append(attempts, ac)
			}
			t.Cleanup(func() { _ = c.Close() })
			cs = append(cs, c)
		}
		d, err := newDriver(cs, WithPrefix(prefix), WithNodeTimeout(suiteNodeTimeout))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close(context.Background()) })
		clients = cs
		return d
	}
	return open(false), open(true), attempts, clients
}

// exclusive is a waiting Lock's request for key, as the portable Locker
// makes it once it listens.
func exclusive(key string) *driver.Request {
	return &driver.Request{Key: key, Owner: rand.Text(), ID: rand.Text(), TTL: 10 * time.Second, Wait: true, Queue: true}
}

// take acquires r, failing the test unless it is granted.
func take(t *testing.T, d *redlock, r *driver.Request) driver.Grant {
	t.Helper()
	g, err := d.Acquire(context.Background(), r)
	if err != nil || g.Hold == nil {
		t.Fatalf("Acquire(%s) = %+v, %v; want a grant", r.Key, g, err)
	}
	return g
}

// queueBehind makes r wait behind the key's holder: subscribed on every
// master (every copy of its news is heard), refused, its mark and pending
// hold placed on every master.
func queueBehind(t *testing.T, d *redlock, r *driver.Request) <-chan struct{} {
	t.Helper()
	woken, leave, err := d.Subscribe(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leave)
	everyLive(t, d)
	g, err := d.Acquire(context.Background(), r)
	if err != nil || g.Hold != nil {
		t.Fatalf("Acquire behind a holder = %+v, %v; want refused", g, err)
	}
	if st := stateOf(r); st.pend.id == "" || slices.Contains(st.pend.on, false) {
		t.Fatalf("a refusal on every master pended %+v", st.pend)
	}
	return woken
}

// releaseWakes releases h and waits until its waiter is woken.
func releaseWakes(t *testing.T, h driver.Hold, woken <-chan struct{}) {
	t.Helper()
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken by the release")
	}
}

// owners lists the live exclusive holder of key on each master ("" none).
func owners(t *testing.T, d *redlock, clients []goredis.UniversalClient, key string) []string {
	t.Helper()
	out := make([]string, len(clients))
	for i, c := range clients {
		x, err := c.HMGet(context.Background(), d.anchor(name{driver.Plain, key}), "x", "xe").Result()
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := x[0].(string); ok && x[1] != nil {
			out[i] = s
		}
	}
	return out
}

// heldBy reports whether owner is the live exclusive holder of key on
// every master ("": none is, anywhere).
func heldBy(t *testing.T, d *redlock, clients []goredis.UniversalClient, key, owner string) bool {
	t.Helper()
	return !slices.ContainsFunc(owners(t, d, clients, key), func(o string) bool { return o != owner })
}

// A release hands the key to the first waiter on each master: the waiter,
// woken, holds it without an attempt of its own, with a fence above the
// last holder's and a Deadline that the masters' records outlive, however
// long it had waited before.
func TestReleaseHandsTheKeyToTheWaiter(t *testing.T) {
	a, b, attempts, clients := handoffDrivers(t)
	key := uniqueKey(t, "k")
	first := take(t, a, exclusive(key))
	r := exclusive(key)
	woken := queueBehind(t, b, r)
	time.Sleep(300 * time.Millisecond) // time pending: the grant's Start must not count it
	before, pended := attempts[0].n.Load(), r.State.(*callState).pend.id
	released := time.Now()
	releaseWakes(t, first.Hold, woken)
	g := take(t, b, r)
	returned := time.Now()
	if n := attempts[0].n.Load() - before; n != 0 {
		t.Errorf("the handed waiter sent %d attempts to take the key; want none", n)
	}
	if id := g.Hold.(*held).id; id != pended {
		t.Errorf("handed grant of hold %s, want the pended %s", id, pended)
	}
	if g.Fence <= first.Fence {
		t.Errorf("handed fence %d, not above the last holder's %d", g.Fence, first.Fence)
	}
	deadline := g.Start.Add(g.Validity)
	validity := r.TTL - b.drift(r.TTL)
	if deadline.Before(released.Add(validity-100*time.Millisecond)) || deadline.After(returned.Add(validity)) {
		t.Errorf("Deadline %v after the release began; want about %v (TTL less drift)", deadline.Sub(released), validity)
	}
	a.bg.Wait() // the release's calls to the masters that answered after its quorum
	for i, o := range owners(t, b, clients, key) {
		if o != r.Owner {
			t.Errorf("master %d: holder %q, want the waiter's %q", i, o, r.Owner)
		}
	}
	if err := g.Hold.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A call that gives up after a release handed it the key (its ctx ended
// first) gives the hold back with its marks, in one script per master:
// the key is free for the next.
func TestAbandonGivesBackAHandedHold(t *testing.T) {
	a, b, _, clients := handoffDrivers(t)
	key := uniqueKey(t, "k")
	first := take(t, a, exclusive(key))
	r := exclusive(key)
	queueBehind(t, b, r)
	if err := first.Hold.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "the masters hand the waiter the key", func() bool {
		return heldBy(t, b, clients, key, r.Owner)
	})
	b.Abandon(context.Background(), r)
	b.bg.Wait() // the masters that replied after the round's quorum
	if !heldBy(t, b, clients, key, "") {
		t.Fatalf("after Abandon the masters' holders are %q; want none", owners(t, b, clients, key))
	}
	for i, live := range liveOn(t, &testLocker{redlock: b}, clients, name{driver.Plain, key}) {
		if len(live) != 0 {
			t.Errorf("master %d keeps %v after Abandon", i, live)
		}
	}
	g := take(t, a, exclusive(key))
	if g.Fence <= first.Fence {
		t.Errorf("fence %d after the hand-off given back, not above %d", g.Fence, first.Fence)
	}
}

// A master whose release comes late, after the handed waiter let the key
// go, hands it nothing: the waiter's release took its mark there too.
func TestReleaseOfAHandedHoldTakesItsMarks(t *testing.T) {
	a, b, _, clients := handoffDrivers(t)
	key := uniqueKey(t, "k")
	first := take(t, a, exclusive(key))
	r := exclusive(key)
	woken := queueBehind(t, b, r)
	h := first.Hold.(*held)
	a.release(context.Background(), []*held{h}, []bool{true, true, true, false, false}, true)
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Fatal("a quorum's hand-off did not wake the waiter")
	}
	g := take(t, b, r)
	if err := g.Hold.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.bg.Wait()
	a.release(context.Background(), []*held{h}, []bool{false, false, false, true, true}, true) // late
	a.bg.Wait()
	if !heldBy(t, b, clients, key, "") {
		t.Errorf("after the late releases the masters' holders are %q; want none", owners(t, b, clients, key))
	}
}

// A request made again after it gave up (a group's take restarting) does
// not take a hand-off heard before: the key went on to the next waiter.
// The release returns once a quorum dropped the hold: the test waits for
// the other masters' replies (bg) before r gives up, as a copy landing
// after r was made again would hand r the key there (its stamp still puts
// it before v), which only r's next attempt, with no Lock loop here to
// make it, gives back.
func TestAbandonForgetsTheHandoffHeard(t *testing.T) {
	a, b, _, clients := handoffDrivers(t)
	key := uniqueKey(t, "k")
	first := take(t, a, exclusive(key))
	r, v := exclusive(key), exclusive(key)
	woken := queueBehind(t, b, r)
	queueBehind(t, b, v) // keeps the key's news here after r gives up
	if err := first.Hold.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-woken
	a.bg.Wait()
	if !heldBy(t, b, clients, key, r.Owner) {
		t.Fatalf("after the release the masters' holders are %q; want r everywhere", owners(t, b, clients, key))
	}
	b.Abandon(context.Background(), r) // hands the key on to v
	b.bg.Wait()
	if g, err := b.Acquire(context.Background(), r); err != nil || g.Hold != nil {
		t.Fatalf("Acquire of the request made again = %+v, %v; want refused, v holds the key", g, err)
	}
	within(t, 5*time.Second, "v holds the key on every master", func() bool {
		return heldBy(t, b, clients, key, v.Owner)
	})
}

// A hand-off wakes its call however the Locker's waiters stand: here
// behind another of the key's waiters that subscribed first (a wake-one
// Notify would wake that one alone).
func TestHandoffWakesItsCall(t *testing.T) {
	a, b, _, _ := handoffDrivers(t)
	key := uniqueKey(t, "k")
	first := take(t, a, exclusive(key))
	r, other := exclusive(key), exclusive(key)
	stateOf(r).stamp = 1 // first among the marks, last to subscribe
	queueBehind(t, b, other)
	woken := queueBehind(t, b, r)
	if err := first.Hold.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Fatal("the call handed the key was not woken")
	}
	take(t, b, r)
}

// A master may hand a call an earlier hold it pended than the others did
// (its later attempt never reached that master): the lease's release
// drops that one too, not only its own.
func TestReleaseDropsEveryPendedHold(t *testing.T) {
	a, b, _, clients := handoffDrivers(t)
	key := uniqueKey(t, "k")
	first := take(t, a, exclusive(key))
	r := exclusive(key)
	woken := queueBehind(t, b, r)
	ctx, pendings := context.Background(), b.pendings(name{driver.Plain, key})
	earlier, err := clients[4].HGet(ctx, pendings, r.ID).Result()
	if err != nil {
		t.Fatal(err)
	}
	if g, err := b.Acquire(ctx, r); err != nil || g.Hold != nil { // pends another hold
		t.Fatalf("second Acquire behind the holder = %+v, %v; want refused", g, err)
	}
	if err := clients[4].HSet(ctx, pendings, r.ID, earlier).Err(); err != nil { // as if it never came there
		t.Fatal(err)
	}
	if err := first.Hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
	<-woken
	g := take(t, b, r)
	a.bg.Wait()
	if got := owners(t, b, clients, key); got[4] != r.Owner {
		t.Fatalf("holders %q: master 4 did not hand the earlier hold", got)
	}
	if err := g.Hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b.bg.Wait()
	if !heldBy(t, b, clients, key, "") {
		t.Errorf("after the release the masters' holders are %q; want none", owners(t, b, clients, key))
	}
}

// A mark not renewed for half its TTL is not handed the key (a live
// waiter renews it every TTL/3; a dead one would hold the key a TTL
// more): the key is left free.
func TestStaleMarkIsNotHandedTheKey(t *testing.T) {
	a, b, _, clients := handoffDrivers(t)
	key := uniqueKey(t, "k")
	first := take(t, a, exclusive(key))
	r := exclusive(key)
	r.TTL = 600 * time.Millisecond
	queueBehind(t, b, r)
	time.Sleep(r.TTL/2 + 50*time.Millisecond) // the mark's age is the point
	if err := first.Hold.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.bg.Wait()
	if !heldBy(t, b, clients, key, "") {
		t.Errorf("holders %q after the release; want none (the mark was stale)", owners(t, b, clients, key))
	}
}

// A release of a call's earlier run (a retry landing late, after the
// request was made again) leaves the marks of the run now waiting: they
// pend a hold it does not list.
func TestLateReleaseLeavesTheNewRunsMarks(t *testing.T) {
	a, b, _, clients := handoffDrivers(t)
	key := uniqueKey(t, "k")
	take(t, a, exclusive(key))
	r := exclusive(key)
	queueBehind(t, b, r)
	earlier := &held{d: b, n: name{driver.Plain, key}, owner: r.Owner, ttl: r.TTL, call: r.ID, pended: "|12345|"}
	b.release(context.Background(), []*held{earlier}, nil, true)
	b.bg.Wait()
	for i, live := range liveOn(t, &testLocker{redlock: b}, clients, name{driver.Plain, key}) {
		if marksOn(live) != 1 {
			t.Errorf("master %d: %v after an earlier run's release; want the waiter's mark", i, live)
		}
	}
}

// A refused waiter that pends its hold looks again in time to renew its
// marks TTL/3 after it placed them, not TTL/3 after its last attempt: a
// release hands the key only to a mark renewed within half its TTL.
func TestPendingWaiterRenewsItsMarksInTime(t *testing.T) {
	r := exclusive("k")
	st := &callState{marked: time.Now().Add(-r.TTL / 4)}
	if got := st.renewBy(r, r.TTL); got > r.TTL/3-r.TTL/4 {
		t.Errorf("pause %v with marks placed TTL/4 ago; want at most %v", got, r.TTL/3-r.TTL/4)
	}
	if got := (&callState{}).renewBy(r, time.Second); got != time.Second {
		t.Errorf("pause %v with no marks placed; want the refusal's, 1s", got)
	}
}

// limited is a waiting Lock's request for a slot of key's Limit(n).
func limited(key string, n int) *driver.Request {
	r := exclusive(key)
	r.Mode, r.Limit = driver.Limited, n
	return r
}

// A Limited holder's release hands its slot to the first waiter on each
// master, as an Exclusive one hands the key: the waiter, woken as the
// masters' copies come (it needs more of them than a release's quorum:
// quorumOf), holds the slot with no attempt of its own, a fence above
// the holders', and is the holder on every master.
func TestReleaseHandsASlotToTheWaiter(t *testing.T) {
	a, b, attempts, clients := handoffDrivers(t)
	key := uniqueKey(t, "k")
	first, second := take(t, a, limited(key, 2)), take(t, a, limited(key, 2))
	r := limited(key, 2)
	woken := queueBehind(t, b, r)
	st := r.State.(*callState)
	before, pended := attempts[0].n.Load(), st.pend.id
	if err := first.Hold.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Every copy heard first: one later than handSpread (a slow machine)
	// would have the waiter attempt, as it should, and this test is of
	// the hand-off, not of that pause.
	within(t, 5*time.Second, "the masters' copies of the hand-off", func() bool {
		return len(b.news.handedTo(hubKey(nameOf(r), r.Mode), pended, st.pend.on)) == len(clients)
	})
	g := waitGrant(t, b, r, woken)
	if n := attempts[0].n.Load() - before; n != 0 {
		t.Errorf("the handed waiter sent %d attempts to take the slot; want none", n)
	}
	if id := g.Hold.(*held).id; id != pended {
		t.Errorf("handed grant of hold %s, want the pended %s", id, pended)
	}
	if g.Fence <= max(first.Fence, second.Fence) {
		t.Errorf("handed fence %d, not above the holders' %d and %d", g.Fence, first.Fence, second.Fence)
	}
	a.bg.Wait()
	if n := slotsHeld(b, clients, key, r.Owner); n != len(clients) {
		t.Errorf("the waiter holds a slot on %d masters of %d", n, len(clients))
	}
	for _, h := range []driver.Hold{second.Hold, g.Hold} {
		if err := h.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// A slot handed by a majority of masters, fewer than a Limited grant
// needs (quorumOf: 4 of 5 for a Limit(2)), is not the waiter's: it
// attempts, as it would without a hand-off, and is granted by the masters.
func TestSlotHandedByTooFewMastersIsNotTaken(t *testing.T) {
	a, b, attempts, clients := handoffDrivers(t)
	if len(clients) != 5 {
		t.Skipf("needs 5 masters, has %d", len(clients)) // the suite's Redlock has 5
	}
	key := uniqueKey(t, "k")
	first, second := take(t, a, limited(key, 2)), take(t, a, limited(key, 2))
	r := limited(key, 2)
	woken := queueBehind(t, b, r)
	for _, c := range clients[3:] { // two masters will not hand the slot: nothing pended there
		if err := c.HDel(context.Background(), b.pendings(name{driver.Plain, key}), r.ID).Err(); err != nil {
			t.Fatal(err)
		}
	}
	before := attempts[0].n.Load()
	if err := first.Hold.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	g := waitGrant(t, b, r, woken)
	if n := attempts[0].n.Load() - before; n == 0 {
		t.Error("the waiter took a slot handed by 3 masters of 5 with no attempt; a Limit(2) needs 4")
	}
	if g.Fence <= max(first.Fence, second.Fence) {
		t.Errorf("fence %d, not above the holders' %d and %d", g.Fence, first.Fence, second.Fence)
	}
	for _, h := range []driver.Hold{second.Hold, g.Hold} {
		if err := h.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// slotsHeld is how many masters have owner among key's Limited holders.
func slotsHeld(d *redlock, clients []goredis.UniversalClient, key, owner string) (n int) {
	for _, c := range clients {
		if _, err := c.ZScore(context.Background(), d.holders(name{driver.Plain, key}, driver.Limited), owner).Result(); err == nil {
			n++
		}
	}
	return n
}

// waitGrant waits for r's grant as the portable wait loop does, once a
// release woke it: an attempt at each wake, or once its refusal's Retry
// has passed; the test fails if none comes within 5 s.
func waitGrant(t *testing.T, d *redlock, r *driver.Request, woken <-chan struct{}) driver.Grant {
	t.Helper()
	deadline := time.After(5 * time.Second)
	retry := 5 * time.Second // until the release wakes it
	for {
		select {
		case <-woken:
		case <-time.After(retry):
		case <-deadline:
			t.Fatal("the waiter was not granted")
		}
		g, err := d.Acquire(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if g.Hold != nil {
			return g
		}
		retry = max(g.Retry, time.Millisecond)
	}
}

// A Limited call that gives up after a release handed it a slot gives the
// slot back with its marks: on no master does it hold one, and the slot
// is free for the next.
func TestAbandonGivesBackAHandedSlot(t *testing.T) {
	a, b, _, clients := handoffDrivers(t)
	key := uniqueKey(t, "k")
	first, second := take(t, a, limited(key, 2)), take(t, a, limited(key, 2))
	r := limited(key, 2)
	queueBehind(t, b, r)
	if err := first.Hold.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "the masters hand the waiter the slot", func() bool {
		return slotsHeld(b, clients, key, r.Owner) == len(clients)
	})
	b.Abandon(context.Background(), r)
	b.bg.Wait()
	if n := slotsHeld(b, clients, key, r.Owner); n != 0 {
		t.Fatalf("after Abandon the waiter holds a slot on %d masters; want none", n)
	}
	g := take(t, a, limited(key, 2))
	if g.Fence <= second.Fence {
		t.Errorf("fence %d after the slot given back, not above %d", g.Fence, second.Fence)
	}
	for _, h := range []driver.Hold{second.Hold, g.Hold} {
		if err := h.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// A call that missed its hand-off's news (a master whose subscription was
// not yet live as it first waited: Subscribe waits for a quorum of them)
// meets the handed hold at its next attempt and is granted there, though
// a waiter that subscribed before it has placed marks since: the hold
// dropped and the call refused, the key would lie free with nobody told
// until their marks' renewal, TTL/3 later. The waiter is handed the key
// next.
func TestUnheardHandoffIsTheCallsAtItsNextAttempt(t *testing.T) {
	a, b, _, clients := handoffDrivers(t)
	key := uniqueKey(t, "k")
	first := take(t, a, exclusive(key))
	r, early := exclusive(key), exclusive(key)
	queueBehind(t, b, r)
	if err := first.Hold.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.bg.Wait()
	if !heldBy(t, b, clients, key, r.Owner) {
		t.Fatalf("holders %q after the release; want r's hand-off everywhere", owners(t, b, clients, key))
	}
	stateOf(r).pend = pending{} // as if r heard none of it
	stateOf(early).stamp = stateOf(r).stamp - 1
	woken := queueBehind(t, a, early) // its marks now stand before r's
	g := take(t, b, r)
	if g.Fence <= first.Fence {
		t.Errorf("fence %d, not above the last holder's %d", g.Fence, first.Fence)
	}
	if err := g.Hold.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Fatal("r's release did not wake the waiter behind it")
	}
	take(t, a, early)
}

// An attempt granted by a minority of masters hands the key on there as
// it undoes the grant. Here a release split the key three ways (masters
// 0 and 1 handed it to r, 2 and 3 to a waiter marked before r since, 4
// yet to drop the holder): neither call heard a quorum, and the attempt
// of the earlier one, refused, gives its two masters on to r, who then
// holds four. Undone in silence, they would lie free with r told
// nothing until its marks' renewal, TTL/3 later.
func TestUndoneGrantHandsTheKeyOn(t *testing.T) {
	a, b, _, clients := handoffDrivers(t)
	ctx, key := context.Background(), uniqueKey(t, "k")
	first := take(t, a, exclusive(key))
	h := first.Hold.(*held)
	r, early := exclusive(key), exclusive(key)
	wokenR := queueBehind(t, b, r)
	a.release(ctx, []*held{h}, []bool{true, true, false, false, false}, true)
	a.bg.Wait()
	stateOf(early).stamp = stateOf(r).stamp - 1
	wokenEarly := queueBehind(t, a, early) // refused by r's holds and first's
	a.release(ctx, []*held{h}, []bool{false, false, true, true, false}, true)
	a.bg.Wait()
	want := []string{r.Owner, r.Owner, early.Owner, early.Owner, first.Hold.(*held).owner}
	if got := owners(t, a, clients, key); !slices.Equal(got, want) {
		t.Fatalf("holders %q; want %q", got, want)
	}
	for _, woken := range []<-chan struct{}{wokenR, wokenEarly} {
		select {
		case <-woken: // two copies of a hand-off: each looks releaseSpread later
		case <-time.After(5 * time.Second):
			t.Fatal("a call handed two masters was not woken")
		}
	}
	if g, err := a.Acquire(ctx, early); err != nil || g.Hold != nil {
		t.Fatalf("Acquire(early) with two masters of five = %+v, %v; want refused", g, err)
	}
	a.bg.Wait()
	select {
	case <-wokenR:
	case <-time.After(5 * time.Second):
		t.Fatalf("the undone grant did not hand the key on (holders %q)", owners(t, a, clients, key))
	}
	g := take(t, b, r)
	if g.Fence <= first.Fence {
		t.Errorf("fence %d, not above the last holder's %d", g.Fence, first.Fence)
	}
}

// The undo of an attempt is quiet on masters where nobody is marked: a
// waiter refused by a quorum, granted by the rest, would otherwise wake
// itself there and attempt again and again. (A message published after
// the undo, heard, shows that nothing came before it.)
func TestUndoWhereNobodyWaitsIsQuiet(t *testing.T) {
	a, b, _, clients := handoffDrivers(t)
	ctx, key := context.Background(), uniqueKey(t, "k")
	first := take(t, a, exclusive(key))
	a.release(ctx, []*held{first.Hold.(*held)}, []bool{false, false, false, true, true}, false)
	a.bg.Wait()
	r := exclusive(key)
	_, leave, err := b.Subscribe(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	everyLive(t, b) // the undo's copies, were they told, would be heard
	if g, err := b.Acquire(ctx, r); err != nil || g.Hold != nil {
		t.Fatalf("Acquire behind a quorum's holder = %+v, %v; want refused", g, err)
	}
	b.bg.Wait()
	n, k := name{driver.Plain, key}, hubKey(name{driver.Plain, key}, driver.Exclusive)
	for _, i := range []int{3, 4} {
		if err := clients[i].Publish(ctx, b.channel(n), fmt.Sprintf("sentinel%d 0", i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	within(t, 5*time.Second, "the sentinels heard", func() bool {
		return b.news.announced(k, "sentinel3") && b.news.announced(k, "sentinel4")
	})
	b.news.mu.Lock()
	defer b.news.mu.Unlock()
	for _, rel := range b.news.keys[k].released {
		if !strings.HasPrefix(rel.id, "sentinel") {
			t.Errorf("heard the release of %q, %d copies; want the undo quiet", rel.id, rel.copies)
		}
	}
}
