package conformance

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance/history"
)

// 6 clients over 3 keys, each call recorded (Lock, TryLock, Refresh,
// Unlock, and leases left to expire), and the history checked against a
// fenced lease with porcupine: no order of the calls may need two holders
// at once, a fence that does not rise, or a release by one not holding.
// A failing history's error is a *history.Violation: Run writes its
// visualization beside the test's output.
func checkLinearizable(e *env) error {
	const clients, rounds = 6, 24
	ls, err := e.clientsN(clients)
	if err != nil {
		return err
	}
	rec := history.New()
	var wg sync.WaitGroup
	for i, l := range ls {
		c := rec.Client()
		wg.Go(func() {
			for j := range rounds {
				if err := e.historyRound(c, l, fmt.Sprintf("%sk%d", e.prefix, (i+j)%3), i*rounds+j); err != nil {
					e.error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := rec.Check(e.ctx); err != nil {
		return err
	}
	if n := rec.Len(); n < clients*rounds {
		return fmt.Errorf("%d calls recorded, want at least %d", n, clients*rounds)
	}
	return nil
}

// historyRound is one call of a client: mostly a Lock held briefly and
// Unlocked, some with a Refresh; every 9th a TryLock; the first client's
// second round leaves its lease to expire (keep-alive off) before it
// Unlocks, which must answer ErrNotHeld. A kept-alive lease that was lost
// all the same (a renewal slower than the TTL on a starved machine) is an
// outcome the history records and the model checks, not a failure here.
func (e *env) historyRound(c *history.Client, l locker.Locker, key string, n int) error {
	if n%9 == 4 {
		lease, err := c.TryLock(e.ctx, l, key)
		switch {
		case errors.Is(err, locker.ErrLocked):
			return nil
		case err != nil:
			return fmt.Errorf("TryLock(%q): %w", key, err)
		}
		return e.unlock(lease)
	}
	expire := n == 1
	opts := []locker.Option{locker.WithKeepAlive(!expire), locker.WithTTL(e.h.ttl())}
	lease, err := c.Lock(e.ctx, l, key, opts...)
	if err != nil {
		return fmt.Errorf("Lock(%q): %w", key, err)
	}
	switch {
	case expire:
		select {
		case <-lease.Done():
		case <-time.After(e.h.ttl() + slack):
			return fmt.Errorf("a lease of %v without keep-alive is still live %v after it was granted", e.h.ttl(), e.h.ttl()+slack)
		}
		if err := lease.Unlock(e.ctx); !errors.Is(err, locker.ErrNotHeld) {
			return fmt.Errorf("Unlock after expiry = %v, want ErrNotHeld", err)
		}
		return nil
	case n%4 == 0:
		if err := lease.Refresh(e.ctx); err != nil && !lost(lease, err) {
			return fmt.Errorf("Refresh(%q): %w", key, err)
		}
	}
	time.Sleep(time.Millisecond) // the work under the lock
	if err := lease.Unlock(e.ctx); err != nil && !lost(lease, err) {
		return fmt.Errorf("Unlock(%q): %w", key, err)
	}
	return nil
}

// lost says err is a call's ErrNotHeld on a lease that had been lost by
// itself (its Done closed with ErrLeaseLost).
func lost(lease locker.Lease, err error) bool {
	return errors.Is(err, locker.ErrNotHeld) && errors.Is(lease.Err(), locker.ErrLeaseLost)
}
