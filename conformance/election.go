package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locker-go/locker"
)

// The checks of elections (locker.Campaign, locker.Observe): one leader at
// a time, each term above the last, every change seen by an observer in
// order, and a leader whose process died replaced within its TTL.

// checkElectionOneLeader: candidates campaigning over and over never lead
// together, and each term is above the one before. An election's name is
// apart from the plain key and the subtree path that spell it, and
// Campaign takes no Shared or Subtree.
func checkElectionOneLeader(e *env) error {
	name := e.prefix + "e"
	ls, err := e.clientsN(4)
	if err != nil {
		return err
	}
	if err := e.electionApart(ls[0], ls[1], name); err != nil {
		return err
	}
	var (
		mu        sync.Mutex
		inOffice  atomic.Int32
		lastTerm  uint64
		terms     int
		wg        sync.WaitGroup
		remaining atomic.Int32
	)
	remaining.Store(24)
	for i, l := range ls {
		wg.Go(func() {
			for remaining.Add(-1) >= 0 {
				lead, err := campaign(e, l, name, locker.WithLabel(fmt.Sprint("candidate ", i)))
				if err != nil {
					e.error(err)
					return
				}
				if n := inOffice.Add(1); n != 1 {
					e.errorf("%d leaders at once", n)
				}
				mu.Lock()
				if lead.Fence() <= lastTerm {
					e.errorf("term %d after term %d: terms must rise", lead.Fence(), lastTerm)
				}
				lastTerm, terms = lead.Fence(), terms+1
				mu.Unlock()
				time.Sleep(time.Millisecond) // in office a while, as a leader works
				inOffice.Add(-1)
				if err := e.unlock(lead); err != nil {
					e.error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	e.logf("%d terms, the last %d", terms, lastTerm)
	return nil
}

// electionApart: a plain lock and a subtree lock on the election's name
// do not stand in a candidate's way, and Shared or Subtree given to
// Campaign are ErrInvalidOption, taking nothing.
func (e *env) electionApart(a, b locker.Locker, name string) error {
	plain, err := e.tryLock(a, name)
	if err != nil {
		return err
	}
	held := []locker.Lease{plain}
	if !e.h.NoModes {
		tree, err := e.tryLock(a, name, locker.Subtree())
		if err != nil {
			return err
		}
		held = append(held, tree)
	}
	for _, opt := range []locker.Option{locker.Shared(), locker.Subtree()} {
		if l, err := locker.Campaign(e.ctx, b, name, opt); !errors.Is(err, locker.ErrInvalidOption) {
			e.errorf("Campaign with Shared or Subtree = %v, %v; want ErrInvalidOption", l, err)
		}
	}
	lead, err := campaign(e, b, name)
	if err != nil {
		return fmt.Errorf("an election beside a plain and a subtree lock of its name: %w", err)
	}
	if lead.Key() != name {
		e.errorf("the leader's lease Key() = %q, want the name %q", lead.Key(), name)
	}
	for _, l := range append(held, lead) {
		if err := e.unlock(l); err != nil {
			return err
		}
	}
	return nil
}

// campaign is Campaign under lockTimeout.
func campaign(e *env, l locker.Locker, name string, opts ...locker.Option) (locker.Lease, error) {
	ctx, cancel := context.WithTimeout(e.ctx, lockTimeout)
	defer cancel()
	lead, err := locker.Campaign(ctx, l, name, opts...)
	if err != nil {
		return nil, fmt.Errorf("Campaign(%q): %w", name, err)
	}
	return lead, nil
}

// checkElectionObserve: an observer that never campaigns sees no leader,
// then each leader in turn, with its label and term, and no leader once
// the last resigns; its channel closes when its context ends.
func checkElectionObserve(e *env) error {
	name := e.prefix + "e"
	ls, err := e.clientsN(3)
	if err != nil {
		return err
	}
	if _, ok := ls[0].(locker.Admin); !ok {
		return skip("this Locker does not implement locker.Admin, which Observe reads")
	}
	ctx, cancel := context.WithCancel(e.ctx)
	seen := locker.Observe(ctx, ls[0], name)
	if err := e.observed(seen, locker.Leader{}, false); err != nil {
		cancel()
		return err
	}
	var last uint64
	for i, l := range ls[1:] {
		label := fmt.Sprint("leader ", i)
		lead, err := campaign(e, l, name, locker.WithLabel(label))
		if err != nil {
			cancel()
			return err
		}
		want := locker.Leader{Name: name, Label: label, Fence: lead.Fence()}
		if err := e.observed(seen, want, false); err != nil {
			cancel()
			return err
		}
		if lead.Fence() <= last {
			e.errorf("term %d after %d", lead.Fence(), last)
		}
		last = lead.Fence()
		if err := e.unlock(lead); err != nil {
			cancel()
			return err
		}
		if err := e.observed(seen, locker.Leader{}, false); err != nil {
			cancel()
			return err
		}
	}
	cancel()
	select {
	case l, ok := <-seen:
		if ok {
			e.errorf("Observe sent %+v after its context ended; want the channel closed", l)
		}
	case <-time.After(slack):
		e.errorf("Observe's channel still open %v after its context ended", slack)
	}
	return nil
}

// observed waits, within the TTL and slack, for the observer to send
// want (compared by name, label and term); a leader other than want on
// the way is a failure (but for no leader, with gap: a dead leader's
// expiry seen before the next grant), as is a Since in the future.
func (e *env) observed(seen <-chan locker.Leader, want locker.Leader, gap bool) error {
	deadline := time.After(e.h.ttl() + slack)
	for {
		select {
		case got, ok := <-seen:
			switch {
			case !ok:
				return fmt.Errorf("Observe's channel closed waiting for %+v", want)
			case got.Name == want.Name && got.Label == want.Label && got.Fence == want.Fence:
				if got.Fence != 0 && (got.Since.IsZero() || got.Since.After(time.Now())) {
					e.errorf("leader %+v: Since is not when the observer learned of it", got)
				}
				return nil
			case gap && got == locker.Leader{}:
				continue
			}
			return fmt.Errorf("Observe sent %+v, want %+v", got, want)
		case <-deadline:
			return fmt.Errorf("Observe did not send %+v within %v", want, e.h.ttl()+slack)
		}
	}
}

// checkElectionLeaderCrash: a leader whose process dies (Crash) loses
// office by its Deadline; the waiting candidate leads within the TTL with
// a higher term, and an observer sees the change.
func checkElectionLeaderCrash(e *env) error {
	if e.h.Crash == nil {
		return skip("Harness.Crash is nil: no way to crash a client")
	}
	name := e.prefix + "e"
	ls, err := e.clientsN(3)
	if err != nil {
		return err
	}
	if _, ok := ls[2].(locker.Admin); !ok {
		return skip("this Locker does not implement locker.Admin, which Observe reads")
	}
	ttl := e.h.ttl()
	old, err := campaign(e, ls[0], name, locker.WithTTL(ttl), locker.WithLabel("old"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	seen := locker.Observe(ctx, ls[2], name)
	// No leader on the way is no failure: on a loaded machine the leader's
	// record may look lapsed for a moment before its renewal lands (a full
	// -race run on SQLite, its 1 s TTL granted late), and Observe says so.
	if err := e.observed(seen, locker.Leader{Name: name, Label: "old", Fence: old.Fence()}, true); err != nil {
		return err
	}
	next := make(chan locker.Lease, 1)
	go func() {
		lead, err := campaign(e, ls[1], name, locker.WithLabel("next"))
		if err != nil {
			e.error(err)
		}
		next <- lead
	}()
	if err := e.h.Crash(e.ctx, ls[0]); err != nil {
		return fmt.Errorf("Crash: %w", err)
	}
	// By its Deadline, which a renewal may have set up to a TTL past the
	// crash; slack for a loaded machine's late timers.
	if err := waitDone(old, time.Until(old.Deadline())+slack); err != nil {
		return err
	}
	lead := <-next
	if lead == nil {
		return nil
	}
	e.logf("a new leader %v after the crashed leader's Deadline", time.Since(old.Deadline()).Round(time.Millisecond))
	if lead.Fence() <= old.Fence() {
		e.errorf("term %d after the crashed leader's %d", lead.Fence(), old.Fence())
	}
	err = e.observed(seen, locker.Leader{Name: name, Label: "next", Fence: lead.Fence()}, true)
	return errors.Join(err, e.unlock(lead))
}
