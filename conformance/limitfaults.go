package conformance

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/locker-go/locker"
)

// limitFaultsN is the Limit of checkLimitFaults's key.
const limitFaultsN = 2

// checkLimitFaults: FaultsUnderContention's faults on a semaphore. Four
// clients take slots of a Limit(2) key in turn, each holding one a
// millisecond. The network is slowed (if the harness can); then both
// holders are made to hang at once, so that the others get a slot only as
// the hung holds lapse; healed, each takes a slot again; then a holder is
// crashed. Never more than two hold at once (each hold counted from its
// Lock's return to its Unlock call, or to its Deadline if that came
// first), no fence is granted twice, the hung holders' Done close by their
// Deadlines, and the others go on throughout.
func checkLimitFaults(e *env) error {
	if err := hangable(e); err != nil {
		return err
	}
	ls, err := e.limitClients(4)
	if err != nil {
		return err
	}
	f, held := newFaultRun(e, len(ls)), &slotLog{}
	work := func(ctx context.Context, l locker.Locker, i int) { f.takeSlots(ctx, l, i, held) }
	if err := f.run(ls, work, f.limitFaults); err != nil {
		return err
	}
	return held.check(e)
}

// takeSlots is client i of checkLimitFaults: take a slot, hold it a
// millisecond (or, asked for it, until it ended), log the hold, Unlock.
func (f *faultRun) takeSlots(ctx context.Context, l locker.Locker, i int, held *slotLog) {
	lock := func(ctx context.Context) (locker.Lease, error) {
		return l.Lock(ctx, f.key, locker.Limit(limitFaultsN), locker.WithTTL(f.e.h.ttl()))
	}
	f.loop(ctx, i, lock, func(lease locker.Lease, from time.Time, asked bool) {
		if !asked {
			select {
			case <-time.After(time.Millisecond):
			case <-lease.Done():
			}
		}
		held.add(lease, from)
	})
}

// limitFaults slows every client, then hangs the two holders (clients 0
// and 1, once each holds), checks their Done and that the others go on,
// heals them and sees each take a slot again; then crashes client 1 while
// it holds and sees the others go on.
func (f *faultRun) limitFaults(ls []locker.Locker) error {
	if err := f.warm(ls); err != nil {
		return err
	}
	var leases [2]locker.Lease
	for i := range leases {
		var err error
		if leases[i], err = f.ask(i); err != nil {
			return err
		}
	}
	var heals []func()
	healAll := sync.OnceFunc(func() {
		for _, heal := range heals {
			heal()
		}
	})
	defer healAll() // a hung client of a check that failed on the way
	for i := range leases {
		heal, err := f.e.h.Hang(f.e.ctx, ls[i])
		if err != nil {
			return fmt.Errorf("Hang: %w", err)
		}
		heals = append(heals, heal)
	}
	hung := time.Now()
	err := f.hungDone(leases[:]...)
	if err == nil {
		err = f.progress(10, "while both holders hung")
		f.e.logf("semaphore: 10 grants to the others %v after the hang began (TTL %v)", time.Since(hung).Round(time.Millisecond), f.e.h.ttl())
	}
	before := [2]int64{f.grants[0].Load(), f.grants[1].Load()}
	healAll()
	if err != nil {
		return err
	}
	for i, n := range before {
		if err := f.wait(func() bool { return f.grants[i].Load() > n }, fmt.Sprintf("healed client %d's next grant", i)); err != nil {
			return err
		}
	}
	return f.crash(ls, 1)
}

// slotLog is the holds of checkLimitFaults's key, as its clients saw them.
type slotLog struct {
	mu    sync.Mutex
	holds []slotHold
}

// slotHold is one hold: its fence, and when it began and ended here.
type slotHold struct {
	fence    uint64
	from, to time.Time
}

// add logs lease's hold from from to now, or to its Deadline if that came
// first: the lease was the holder's only until then.
func (s *slotLog) add(lease locker.Lease, from time.Time) {
	to := time.Now()
	if d := lease.Deadline(); d.Before(to) {
		to = d
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds = append(s.holds, slotHold{fence: lease.Fence(), from: from, to: to})
}

// check reports a fence granted twice, and any moment more than
// limitFaultsN held at once: each hold here lies within the backend's
// (from a grant's reply to an Unlock's request, or to a Deadline, which
// comes before the backend lets the hold lapse), so more here is more
// there.
func (s *slotLog) check(e *env) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fences := map[uint64]bool{}
	type edge struct {
		at   time.Time
		step int // +1 a hold begins, -1 one ends
		h    slotHold
	}
	var edges []edge
	for _, h := range s.holds {
		if fences[h.fence] {
			e.errorf("fence %d granted twice", h.fence)
		}
		fences[h.fence] = true
		edges = append(edges, edge{h.from, 1, h}, edge{h.to, -1, h})
	}
	// At one instant, an end comes before a beginning: they did not overlap.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.step - b.step
	})
	holding, most, over := map[slotHold]bool{}, 0, 0
	for _, g := range edges {
		if g.step < 0 {
			delete(holding, g.h)
			continue
		}
		holding[g.h] = true
		most = max(most, len(holding))
		if len(holding) > limitFaultsN {
			if over++; over <= 3 { // the first few say enough
				e.errorf("%d holders at once of a Limit(%d) at %v: %v", len(holding), limitFaultsN, g.at.Format(time.StampMicro), holdsOf(holding))
			}
		}
	}
	if over > 3 {
		e.errorf("more than %d holders at once of a Limit(%d) %d times in all", limitFaultsN, limitFaultsN, over)
	}
	e.logf("semaphore: %d grants under faults, at most %d holders at once", len(s.holds), most)
	return nil
}

// holdsOf describes holds for a failure.
func holdsOf(holding map[slotHold]bool) string {
	var out []string
	for h := range holding {
		out = append(out, fmt.Sprintf("fence %d from %v to %v", h.fence, h.from.Format(time.StampMicro), h.to.Format(time.StampMicro)))
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}
