package redsync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// Semaphores (driver.Limiter) on Redlock beyond the conformance checks:
// mismatches decided by a quorum and given back everywhere, the waiting
// marks counted ahead, the wakes of releases, Status, ForceUnlock and
// batches.

// limitOn runs acquireScript for owner's Limit(n) request of key on the
// given masters (hold id, call id, queueing q at stamp), and returns each
// one's outcome.
func limitOn(t *testing.T, l *testLocker, clients []goredis.UniversalClient, key, owner string, n int,
	id, call string, q int, stamp int64, masters ...int) []int64 {
	t.Helper()
	keys := append([]string{l.counterKey()}, l.records(name{driver.Plain, key})...)
	var out []int64
	for _, i := range masters {
		v, err := acquireScript.Run(context.Background(), clients[i], keys, 1, owner, int(driver.Limited), 60000, id, false,
			q, call, stamp, conflicting[driver.Limited], n, "").Int64Slice()
		if err != nil {
			t.Fatalf("master %d: %v", i, err)
		}
		out = append(out, v[0])
	}
	return out
}

// every is the masters' indexes.
var every = []int{0, 1, 2, 3, 4}

// outcomesAre fails unless every outcome is want.
func outcomesAre(t *testing.T, what string, got []int64, want int64) {
	t.Helper()
	for i, o := range got {
		if o != want {
			t.Fatalf("%s: outcome %d on master %d, want %d (all: %v)", what, o, i, want, got)
		}
	}
}

// A mismatch answered by a quorum of masters is ErrModeMismatch, and
// leaves nothing on any master: neither the grants of the others nor a
// waiting Lock's marks. A minority's mismatch is no ErrModeMismatch: a
// Limit(2), granted on the other 3 masters, is refused as locked, since
// it needs 4 (quorumOf).
func TestLimitMismatchQuorumLeavesNothing(t *testing.T) {
	ls, clients, _ := prefixedLockers(t, 1)
	l := ls[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	outcomesAre(t, "a's Limit(2) on masters 0-2", limitOn(t, l, clients, "k", "a", 2, "11", "ca", notQueued, 0, 0, 1, 2), granted)
	for i, o := range []string{"b", "c", "d"} {
		outcomesAre(t, o+"'s Limit(3) on masters 3-4", limitOn(t, l, clients, "k", o, 3, fmt.Sprint(20+i), "c"+o, notQueued, 0, 3, 4), granted)
	}
	for what, opts := range map[string][]locker.Option{
		"Limit(3)": {locker.Limit(3)}, "an exclusive lock": nil, "a shared lock": {locker.Shared()},
	} {
		if lease, err := l.TryLock(ctx, "k", opts...); !errors.Is(err, locker.ErrModeMismatch) {
			t.Errorf("TryLock of %s, a Limit(2) on 3 masters: %v, %v; want ErrModeMismatch", what, lease, err)
		}
	}
	l.bg.Wait()
	want := [][]string{{"4 a"}, {"4 a"}, {"4 a"}, {"4 b", "4 c", "4 d"}, {"4 b", "4 c", "4 d"}}
	for i, live := range liveOn(t, l, clients, name{driver.Plain, "k"}) {
		slices.Sort(live)
		if !slices.Equal(live, want[i]) {
			t.Errorf("master %d after the mismatches: %v, want %v", i, live, want[i])
		}
	}
	if lease, err := l.TryLock(ctx, "k", locker.Limit(2)); lease != nil || !errors.Is(err, locker.ErrLocked) || errors.Is(err, locker.ErrModeMismatch) {
		t.Fatalf("a Limit(2), mismatched on masters 3-4 only: granted %v, %v; want ErrLocked", lease != nil, err)
	}
}

// A waiting Lock that meets a mismatch on a quorum gives back its waiting
// marks: a Limit(3) waits, marked on masters 0-2 where the key is full;
// those holders then give way to a Limit(2), and the Lock, woken, fails
// with ErrModeMismatch, leaving nothing of it on any master.
func TestLimitMismatchGivesBackMarks(t *testing.T) {
	ls, clients, _ := prefixedLockers(t, 1)
	l := ls[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, quorum := name{driver.Plain, "k"}, []int{0, 1, 2}
	var hs []*held
	for i, o := range []string{"b", "c", "d"} {
		id := fmt.Sprint(20 + i)
		outcomesAre(t, o, limitOn(t, l, clients, "k", o, 3, id, "c"+o, notQueued, 0, quorum...), granted)
		hs = append(hs, &held{d: l.redlock, n: n, mode: driver.Limited, owner: o, id: id, ttl: time.Minute})
	}
	failed := make(chan error, 1)
	go func() {
		_, err := l.Lock(ctx, "k", locker.Limit(3))
		failed <- err
	}()
	within(t, 10*time.Second, "the waiter's marks on masters 0-2", func() bool {
		live := liveOn(t, l, clients, n)
		return marksOn(live[0]) == 1 && marksOn(live[1]) == 1 && marksOn(live[2]) == 1
	})
	l.release(ctx, hs, []bool{true, true, true, false, false}, false) // silently
	outcomesAre(t, "a's Limit(2) on masters 0-2", limitOn(t, l, clients, "k", "a", 2, "11", "ca", notQueued, 0, quorum...), granted)
	publishAll(t, l, clients, "k", " 0") // wakes the waiter
	if err := <-failed; !errors.Is(err, locker.ErrModeMismatch) {
		t.Fatalf("the Lock of Limit(3), woken to a Limit(2) on 3 masters: %v; want ErrModeMismatch", err)
	}
	l.bg.Wait()
	for i, live := range liveOn(t, l, clients, n) {
		if want := []string{"4 a"}; i > 2 && len(live) != 0 || i <= 2 && !slices.Equal(live, want) {
			t.Errorf("master %d after the mismatch: %v", i, live)
		}
	}
}

// A Limited request counts the live Limited marks before it: a full
// Limit(2) whose holder leaves has its slot kept for the first waiter,
// refusing a TryLock and a later waiter, and granting the first.
func TestLimitCountsMarksAhead(t *testing.T) {
	ls, clients, _ := prefixedLockers(t, 1)
	l := ls[0]
	ctx := context.Background()
	outcomesAre(t, "a", limitOn(t, l, clients, "k", "a", 2, "11", "ca", notQueued, 0, every...), granted)
	outcomesAre(t, "b", limitOn(t, l, clients, "k", "b", 2, "12", "cb", notQueued, 0, every...), granted)
	outcomesAre(t, "w, a third", limitOn(t, l, clients, "k", "w", 2, "13", "cw", remark, 100, every...), refused)
	b := &held{d: l.redlock, n: name{driver.Plain, "k"}, mode: driver.Limited, owner: "b", id: "12", ttl: time.Minute}
	if err := l.outcome(l.release(ctx, []*held{b}, nil, false), 2); err != nil {
		t.Fatal(err)
	}
	outcomesAre(t, "a TryLock behind w's mark", limitOn(t, l, clients, "k", "x", 2, "14", "cx", notQueued, 0, every...), refused)
	outcomesAre(t, "v, a waiter after w", limitOn(t, l, clients, "k", "v", 2, "15", "cv", remark, 200, every...), refused)
	outcomesAre(t, "w, the first waiter", limitOn(t, l, clients, "k", "w", 2, "13", "cw", queued, 100, every...), granted)
	for i, live := range liveOn(t, l, clients, name{driver.Plain, "k"}) {
		slices.Sort(live)
		if want := []string{"4 a", "4 w", "w4cv"}; !slices.Equal(live, want) {
			t.Errorf("master %d: %v, want %v", i, live, want)
		}
	}
}

// lockIn runs l.Lock(key, opts) in the background; its lease (nil if it
// failed) comes on the channel.
func lockIn(t *testing.T, ctx context.Context, l locker.Locker, key string, opts ...locker.Option) <-chan locker.Lease {
	ch := make(chan locker.Lease, 1)
	go func() {
		lease, err := l.Lock(ctx, key, opts...)
		if err != nil {
			t.Error(err)
		}
		ch <- lease
	}()
	return ch
}

// marked waits until key has n live marks on every master.
func marked(t *testing.T, l *testLocker, clients []goredis.UniversalClient, key string, n int) {
	t.Helper()
	within(t, 10*time.Second, fmt.Sprintf("%d waiting marks on every master", n), func() bool {
		for _, live := range liveOn(t, l, clients, name{driver.Plain, key}) {
			if marksOn(live) != n {
				return false
			}
		}
		return true
	})
}

// soon takes a waiter's lease, which must come well before the waiter
// would look again unwoken (TTL/3: 5 s).
func soon(t *testing.T, ch <-chan locker.Lease, who string) locker.Lease {
	t.Helper()
	select {
	case lease := <-ch:
		if lease == nil {
			t.FailNow()
		}
		return lease
	case <-time.After(2 * time.Second):
		t.Fatalf("%s not granted within 2 s of a release", who)
	}
	return nil
}

// A release of one holder of a full Limit(2) wakes the queued waiter,
// which gets the slot at once, fenced above both holders.
func TestLimitReleaseWakesWaiter(t *testing.T) {
	ls, clients, _ := prefixedLockers(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var held [2]locker.Lease
	for i := range held {
		var err error
		if held[i], err = ls[i].TryLock(ctx, "k", locker.Limit(2)); err != nil {
			t.Fatal(err)
		}
	}
	got := lockIn(t, ctx, ls[2].Locker, "k", locker.Limit(2))
	marked(t, ls[0], clients, "k", 1)
	if err := held[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lease := soon(t, got, "the waiter")
	if lease.Fence() <= max(held[0].Fence(), held[1].Fence()) {
		t.Errorf("the waiter's fence %d is not above the holders' %d, %d", lease.Fence(), held[0].Fence(), held[1].Fence())
	}
	for _, l := range []locker.Lease{lease, held[1]} {
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
}

// Two holders of a full Limit(3) leaving at once admit both waiters: the
// releases name the last waiter they admit, not only the first.
func TestLimitReleasesWakeEveryAdmitted(t *testing.T) {
	ls, clients, _ := prefixedLockers(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var held [3]locker.Lease
	for i := range held {
		var err error
		if held[i], err = ls[i].TryLock(ctx, "k", locker.Limit(3)); err != nil {
			t.Fatal(err)
		}
	}
	first := lockIn(t, ctx, ls[3].Locker, "k", locker.Limit(3))
	marked(t, ls[0], clients, "k", 1)
	second := lockIn(t, ctx, ls[4].Locker, "k", locker.Limit(3))
	marked(t, ls[0], clients, "k", 2)
	var wg sync.WaitGroup
	for _, l := range held[:2] {
		wg.Go(func() {
			if err := l.Unlock(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	leases := []locker.Lease{soon(t, first, "the first waiter"), soon(t, second, "the second waiter"), held[2]}
	for _, l := range leases {
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
}

// Status reports a Limited key's mode, Limit and every holder (the
// re-entered one once, with its two holds); ForceUnlock takes them all
// from every master.
func TestLimitStatusAndForce(t *testing.T) {
	ls, clients, _ := prefixedLockers(t, 3)
	adm := ls[0].Locker.(locker.Admin)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, owner := range []string{"o1", "o1", "o2"} {
		if _, err := ls[i].TryLock(ctx, "k", locker.Limit(3), locker.WithOwner(owner)); err != nil {
			t.Fatal(err)
		}
	}
	info, err := adm.Status(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode != locker.ModeLimited || info.Limit != 3 || len(info.Holders) != 2 ||
		info.Holders[0].Holds != 2 || info.Holders[1].Holds != 1 {
		t.Errorf("Status = %+v; want mode L, Limit 3, two holders, the first with 2 holds", info)
	}
	list, err := adm.List(ctx, "")
	if err != nil || len(list) != 1 || list[0].Mode != locker.ModeLimited || list[0].Limit != 3 {
		t.Errorf("List = %+v, %v; want the Limit(3)", list, err)
	}
	if err := adm.ForceUnlock(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if info, err := adm.Status(ctx, "k"); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("Status after ForceUnlock = %+v, %v; want ErrNotHeld", info, err)
	}
	for i, live := range liveOn(t, ls[0], clients, name{driver.Plain, "k"}) {
		if len(live) != 0 {
			t.Errorf("master %d after ForceUnlock: %v", i, live)
		}
	}
	lease, err := ls[1].TryLock(ctx, "k", locker.Limit(2))
	if err != nil {
		t.Fatalf("a Limit(2) after the Limit(3) was forced out: %v", err)
	}
	_ = lease.Unlock(ctx)
}

// A batch of Limited requests (LockAll with Limit) is granted to n
// owners, refused to the next, and mismatched for another Limit.
func TestLimitBatch(t *testing.T) {
	ls, _, _ := prefixedLockers(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys := []string{"a", "b"}
	for _, l := range ls[:2] {
		if _, err := locker.TryLockAll(ctx, l.Locker, keys, locker.Limit(2)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := locker.TryLockAll(ctx, ls[2].Locker, keys, locker.Limit(2)); !errors.Is(err, locker.ErrLocked) {
		t.Errorf("a third batch of Limit(2): %v; want ErrLocked", err)
	}
	if _, err := locker.TryLockAll(ctx, ls[2].Locker, keys, locker.Limit(3)); !errors.Is(err, locker.ErrModeMismatch) {
		t.Errorf("a batch of Limit(3): %v; want ErrModeMismatch", err)
	}
}

// A release of a Limited holder names the last waiter the free slots
// admit: with a Limit(3) held by a, b and c and waiters w1, w2, a's
// release names w1, b's w2 (so that w2 looks again too).
func TestLimitReleaseNamesLastAdmitted(t *testing.T) {
	ls, clients, _ := prefixedLockers(t, 1)
	l := ls[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := name{driver.Plain, "k"}
	var hs []*held
	for i, o := range []string{"a", "b", "c"} {
		id := fmt.Sprint(11 + i)
		outcomesAre(t, o, limitOn(t, l, clients, "k", o, 3, id, "c"+o, notQueued, 0, every...), granted)
		hs = append(hs, &held{d: l.redlock, n: n, mode: driver.Limited, owner: o, id: id, ttl: time.Minute})
	}
	outcomesAre(t, "w1", limitOn(t, l, clients, "k", "w1", 3, "21", "cw1", remark, 100, every...), refused)
	outcomesAre(t, "w2", limitOn(t, l, clients, "k", "w2", 3, "22", "cw2", remark, 200, every...), refused)
	ps := clients[0].Subscribe(ctx, l.channel(n))
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.outcome(l.release(ctx, hs[:2], nil, true), 2); err != nil {
		t.Fatal(err)
	}
	want := []string{"11 ", " 100 4 cw1", "12 ", " 200 4 cw2"}
	for i := range 2 {
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(msg.Payload, want[2*i]) || !strings.HasSuffix(msg.Payload, want[2*i+1]) {
			t.Errorf("release %d published %q, want %q...%q", i+1, msg.Payload, want[2*i], want[2*i+1])
		}
	}
}
