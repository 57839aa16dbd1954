package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/locker-go/locker"
)

// The checks of waiting for a key: a waiter can give up, is woken by the
// Unlock it waits for, in turn, and by the Close of its own Locker.

func checkCancellation(e *env) error {
	key := e.prefix + "k"
	ls, err := e.clientsN(3)
	if err != nil {
		return err
	}
	a, b, c := ls[0], ls[1], ls[2]
	held, err := e.lock(a, key)
	if err != nil {
		return err
	}
	if err := abandonLocks(e, b, key); err != nil {
		return err
	}
	if e.h.Count != nil { // else this part goes unchecked: see Harness.Count
		n, err := e.count(key)
		if err != nil {
			return err
		}
		if n != 1 {
			e.errorf("backend holds %d records for the key after two abandoned Locks, want the holder's 1", n)
		}
	}
	got := make(chan error, 1)
	go func() {
		lease, err := c.Lock(e.ctx, key)
		if err == nil {
			err = lease.Unlock(e.ctx)
		}
		got <- err
	}()
	if err := e.unlock(held); err != nil {
		return err
	}
	select {
	case err := <-got:
		return err
	case <-time.After(slack):
		return errors.New("the next owner was delayed after abandoned Locks")
	}
}

// abandonAfter is the least time abandonLocks' Locks wait; they wait
// three refusals' round trips more, measured just before, so that they
// give up while waiting, not while their first attempt is still on its
// way (a loaded ZooKeeper ensemble's and a race-built SQLite's took over
// 100 ms and 300 ms): ErrLocked is claimed once a refusal was seen.
const abandonAfter = 300 * time.Millisecond

// abandonLocks has l wait for the held key and give up twice: at its
// context's deadline, then when it is cancelled.
func abandonLocks(e *env, l locker.Locker, key string) error {
	t0 := time.Now()
	if _, err := l.TryLock(e.ctx, key); !errors.Is(err, locker.ErrLocked) {
		return fmt.Errorf("TryLock of a held key = %v, want ErrLocked", err)
	}
	after := abandonAfter + 3*time.Since(t0)
	ctx, cancel := context.WithTimeout(e.ctx, after)
	defer cancel()
	start := time.Now()
	if lease, err := l.Lock(ctx, key); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, locker.ErrLocked) {
		return fmt.Errorf("Lock past its deadline = %v, %v; want an error matching context.DeadlineExceeded and ErrLocked", lease, err)
	}
	if d := time.Since(start); d > after+slack {
		e.errorf("Lock returned %v after its ctx deadline", d-after)
	}
	ctx, cancel = context.WithCancel(e.ctx)
	defer cancel()
	time.AfterFunc(after, cancel)
	if lease, err := l.Lock(ctx, key); !errors.Is(err, context.Canceled) || !errors.Is(err, locker.ErrLocked) {
		return fmt.Errorf("cancelled Lock = %v, %v; want an error matching context.Canceled and ErrLocked", lease, err)
	}
	return nil
}

// handoffWithin bounds Handoff's wait after Unlock: far below the holder's
// TTL and any polling worth the name, and above a notified handoff on a
// loaded machine (SQLite's took 1.24 s in a race-built binary under the
// full test run).
const handoffWithin = 2 * time.Second

// A waiter gets the key soon after Unlock, far sooner than the holder's TTL.
func checkHandoff(e *env) error {
	key := e.prefix + "k"
	a, b, err := e.two()
	if err != nil {
		return err
	}
	held, err := e.lock(a, key, locker.WithTTL(time.Minute))
	if err != nil {
		return err
	}
	type acquired struct {
		at  time.Time
		err error
	}
	got := make(chan acquired, 1)
	go func() {
		lease, err := b.Lock(e.ctx, key)
		got <- acquired{time.Now(), err}
		if err == nil {
			_ = lease.Unlock(e.ctx)
		}
	}()
	if e.h.FIFO && e.h.Count != nil {
		if err := eventually(slack, "the waiter never queued", e.countIs(key, 2)); err != nil {
			return err
		}
	} else {
		// No backend state shows a waiter here; if it has not begun waiting
		// yet, the check is weaker, never wrong.
		time.Sleep(200 * time.Millisecond)
	}
	released := time.Now()
	if err := e.unlock(held); err != nil {
		return err
	}
	select {
	case r := <-got:
		if r.err != nil {
			return r.err
		}
		if d := r.at.Sub(released); d > handoffWithin {
			return fmt.Errorf("handoff took %v: is the waiter polling?", d)
		}
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("waiter did not get the key within 10s of Unlock (TTL 1m)")
	}
}

func checkFIFO(e *env) error {
	switch {
	case !e.h.FIFO:
		return skip("the harness declares no FIFO order for this backend")
	case e.h.Count == nil:
		return skip("Harness.Count is nil: no way to see each waiter queue before the next")
	}
	const waiters = 5
	key := e.prefix + "k"
	holder, err := e.client()
	if err != nil {
		return err
	}
	held, err := e.lock(holder, key)
	if err != nil {
		return err
	}
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range waiters {
		l, err := e.client()
		if err != nil {
			return err
		}
		wg.Go(func() {
			lease, err := l.Lock(e.ctx, key)
			if err != nil {
				e.error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			_ = lease.Unlock(e.ctx)
		})
		// On this early return the waiters still wait: closing the clients
		// after the check ends their Locks.
		if err := eventually(slack, "waiter never queued", e.countIs(key, i+2)); err != nil {
			return err
		}
	}
	if err := e.unlock(held); err != nil {
		return err
	}
	wg.Wait()
	for i, w := range order {
		if w != i {
			return fmt.Errorf("waiters got the key in order %v, want arrival order", order)
		}
	}
	return nil
}

func checkCloseWakesWaiters(e *env) error {
	key := e.prefix + "k"
	a, b, err := e.two()
	if err != nil {
		return err
	}
	held, err := e.lock(a, key)
	if err != nil {
		return err
	}
	got := make(chan error, 1)
	go func() {
		_, err := b.Lock(e.ctx, key)
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // let it block; if not yet, it sees ErrClosed at once
	if err := b.Close(); err != nil {
		return fmt.Errorf("Close: %w", err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, locker.ErrClosed) {
			e.errorf("Lock waiting during Close = %v, want ErrClosed", err)
		}
	case <-time.After(slack):
		return errors.New("Close did not end a waiting Lock")
	}
	return e.unlock(held)
}
