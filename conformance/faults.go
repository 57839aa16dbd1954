package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance/history"
)

// The faults under contention: 4 clients take one key in turn and update a
// fenced counter under it (a write with a fence below the highest seen is
// refused, as a fenced resource would), every call recorded. The network
// is slowed (if the harness can), then the client holding the key is made
// to hang, then healed; then the one holding is crashed. The history must be linearizable, the counter exact (no update
// lost to two holders), the hung holder's Done closed by its Deadline, the
// others must go on while it hangs and after the crash, and it must take
// the key again once healed.
func checkFaultsUnderContention(e *env) error {
	if err := hangable(e); err != nil {
		return err
	}
	ls, err := e.clientsN(4)
	if err != nil {
		return err
	}
	f := newFaultRun(e, len(ls))
	f.rec = history.New()
	cs := make([]*history.Client, len(ls))
	for i := range cs {
		cs[i] = f.rec.Client()
	}
	work := func(ctx context.Context, l locker.Locker, i int) { f.work(ctx, cs[i], l, i) }
	if err := f.run(ls, work, f.faults); err != nil {
		return err
	}
	if err := f.rec.Check(e.ctx); err != nil {
		return err
	}
	if v, n := f.counter.Exact(); v != n {
		return fmt.Errorf("fenced counter = %d after %d accepted writes: an update was lost to two holders", v, n)
	}
	return nil
}

// faultRun is what the clients of checkFaultsUnderContention (and of
// checkLimitFaults) share.
type faultRun struct {
	e       *env
	key     string
	rec     *history.Recorder
	counter history.FencedCounter
	grants  []atomic.Int64      // per client
	granted chan struct{}       // a signal per grant, dropped when one is pending
	holding []chan locker.Lease // a client's lease, while the fault step asks for it
	asking  atomic.Int32        // 1 + the client whose lease is asked for; 0: none
}

// hangable is the skip of a check whose harness cannot hang and crash a
// client, else nil.
func hangable(e *env) error {
	if e.h.Hang == nil || e.h.Crash == nil {
		return skip("Harness.Hang or Harness.Crash is nil: no way to make a holder hang or crash")
	}
	return nil
}

// run runs work as each client of ls (i, its index) while faults acts on
// them, and returns faults' error once every client has stopped.
func (f *faultRun) run(ls []locker.Locker, work func(ctx context.Context, l locker.Locker, i int), faults func([]locker.Locker) error) error {
	ctx, cancel := context.WithCancel(f.e.ctx)
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Go(func() { work(ctx, l, i) })
	}
	err := faults(ls)
	cancel()
	wg.Wait()
	return err
}

// newFaultRun is the run of n clients on the check's key "k".
func newFaultRun(e *env, n int) *faultRun {
	f := &faultRun{e: e, key: e.prefix + "k", grants: make([]atomic.Int64, n),
		holding: make([]chan locker.Lease, n), granted: make(chan struct{}, 1)}
	for i := range f.holding {
		f.holding[i] = make(chan locker.Lease, 1)
	}
	return f
}

// grant counts client i's grant of lease and, if the fault step asks for
// its lease, hands it over and waits for it to end: true then.
func (f *faultRun) grant(i int, lease locker.Lease) (asked bool) {
	f.grants[i].Add(1)
	select {
	case f.granted <- struct{}{}:
	default:
	}
	if f.asking.Load() != int32(i+1) {
		return false
	}
	f.holding[i] <- lease // the fault step acts on it now
	<-lease.Done()
	return true
}

// work is client i: take the key, read the counter, hold briefly, write
// it back with the lease's fence unless the lease has ended, Unlock.
func (f *faultRun) work(ctx context.Context, c *history.Client, l locker.Locker, i int) {
	lock := func(ctx context.Context) (locker.Lease, error) {
		return c.Lock(ctx, l, f.key, locker.WithTTL(f.e.h.ttl()))
	}
	f.loop(ctx, i, lock, func(lease locker.Lease, _ time.Time, _ bool) {
		v := f.counter.Read()
		select {
		case <-time.After(time.Millisecond):
		case <-lease.Done():
		}
		if lease.Err() == nil {
			f.counter.Write(lease.Fence(), v+1)
		}
	})
}

// loop is client i's run: lock, count the grant (handing the lease over
// if the fault step asks for it, see grant), hold it (given when the lock
// returned and whether the lease was asked for, and so has ended), Unlock;
// until ctx ends. A failed lock (hung, crashed, or the run is over: the
// history, if any, has it) is tried again 20 ms later.
func (f *faultRun) loop(ctx context.Context, i int, lock func(context.Context) (locker.Lease, error),
	hold func(lease locker.Lease, from time.Time, asked bool)) {
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		lease, err := lock(lctx)
		cancel()
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond): // a crashed client fails at once
			}
			continue
		}
		from := time.Now()
		hold(lease, from, f.grant(i, lease))
		uctx, cancel := context.WithTimeout(f.e.ctx, 20*time.Second)
		_ = lease.Unlock(uctx) // a hung client's waits for the heal
		cancel()
	}
}

// warm lets 20 grants go by, then slows every client while 10 more do
// (slow): the faults come after.
func (f *faultRun) warm(ls []locker.Locker) error {
	if err := f.progress(20, "before the faults"); err != nil {
		return err
	}
	return f.slow(ls)
}

// faults slows every client, then hangs the holder (client 0 when it holds), checks its Done and
// that the others go on, heals it and sees it take the key again; then
// crashes client 1 while it holds and sees the others go on.
func (f *faultRun) faults(ls []locker.Locker) error {
	if err := f.warm(ls); err != nil {
		return err
	}
	lease, err := f.ask(0)
	if err != nil {
		return err
	}
	heal, err := f.e.h.Hang(f.e.ctx, ls[0])
	if err != nil {
		return fmt.Errorf("Hang: %w", err)
	}
	hung := time.Now()
	err = f.hungDone(lease)
	if err == nil {
		err = f.progress(10, "while the holder hung")
		f.e.logf("under contention: 10 grants to the others %v after the hang began (TTL %v)", time.Since(hung).Round(time.Millisecond), f.e.h.ttl())
	}
	before := f.grants[0].Load()
	heal()
	healed := time.Now()
	if err != nil {
		return err
	}
	if err := f.wait(func() bool { return f.grants[0].Load() > before }, "the healed client's next grant"); err != nil {
		return err
	}
	f.e.logf("under contention: the healed client's next grant %v after the heal", time.Since(healed).Round(time.Millisecond))
	return f.crash(ls, 1)
}

// hungDone waits for hung leases to end, each by its Deadline: all at
// once, so that each is timed as it ends.
func (f *faultRun) hungDone(leases ...locker.Lease) error {
	errs := make([]error, len(leases))
	var wg sync.WaitGroup
	for i, lease := range leases {
		wg.Go(func() {
			if errs[i] = waitDone(lease, f.e.h.ttl()+slack); errs[i] != nil {
				return
			}
			late := time.Since(lease.Deadline())
			f.e.logf("under contention: a hung holder's Done closed %v after its Deadline (negative: before)", late.Round(time.Millisecond))
			if late > lateAllowance {
				f.e.errorf("a hung holder's Done closed %v after its Deadline", late)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// crash crashes client i once it holds, and sees the others go on.
func (f *faultRun) crash(ls []locker.Locker, i int) error {
	if _, err := f.ask(i); err != nil {
		return err
	}
	if err := f.e.h.Crash(f.e.ctx, ls[i]); err != nil {
		return fmt.Errorf("Crash: %w", err)
	}
	return f.progress(10, "after the holder crashed")
}

// slow adds TTL/20 of latency each way to every client's traffic while 10
// grants go by, if the harness can.
func (f *faultRun) slow(ls []locker.Locker) error {
	if f.e.h.Slow == nil {
		return nil
	}
	for _, l := range ls {
		heal, err := f.e.h.Slow(f.e.ctx, l, f.e.h.ttl()/20)
		if err != nil {
			return fmt.Errorf("Slow: %w", err)
		}
		defer heal()
	}
	start := time.Now()
	// Each grant is several round trips, each slowed: allow 10 one-way
	// delays a grant beside the usual bound (etcd took 8.1-8.4 s for the
	// 10 here alone, and past 10 s with every package's tests at once).
	target := f.total() + 10
	err := f.waitUpTo(func() bool { return f.total() >= target }, "10 grants with added latency", f.bound()+10*10*f.e.h.ttl()/20)
	f.e.logf("under contention: 10 grants with %v added each way took %v", f.e.h.ttl()/20, time.Since(start).Round(time.Millisecond))
	return err
}

// ask waits for client i's next grant and returns its lease, which the
// client then holds until it ends.
func (f *faultRun) ask(i int) (locker.Lease, error) {
	f.asking.Store(int32(i + 1))
	defer f.asking.Store(0)
	select {
	case lease := <-f.holding[i]:
		return lease, nil
	case <-time.After(f.bound()):
		return nil, fmt.Errorf("client %d had no grant within %v", i, f.bound())
	}
}

// bound is how long the run waits for any step: the key's TTL and the
// slack, twice.
func (f *faultRun) bound() time.Duration { return 2 * (f.e.h.ttl() + slack) }

// progress waits for n more grants in all.
func (f *faultRun) progress(n int64, when string) error {
	target := f.total() + n
	return f.wait(func() bool { return f.total() >= target }, fmt.Sprintf("%d grants %s", n, when))
}

func (f *faultRun) total() (n int64) {
	for i := range f.grants {
		n += f.grants[i].Load()
	}
	return n
}

// wait waits until cond holds, looking again at every grant, for bound.
func (f *faultRun) wait(cond func() bool, what string) error {
	return f.waitUpTo(cond, what, f.bound())
}

// waitUpTo waits until cond holds, looking again at every grant, for d.
func (f *faultRun) waitUpTo(cond func() bool, what string, d time.Duration) error {
	timeout := time.After(d)
	for !cond() {
		select {
		case <-f.granted:
		case <-timeout:
			return fmt.Errorf("no %s within %v", what, d)
		}
	}
	return nil
}
