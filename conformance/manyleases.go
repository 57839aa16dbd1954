package conformance

import (
	"errors"
	"fmt"
	"time"

	"github.com/locker-go/locker"
)

// manyLeases is how many leases one Locker holds in ManyLeases: enough for
// a driver that renews in batches (driver.BatchRefresher) to renew several
// together, few enough to take quickly on every backend (and to leave a
// loaded machine's one SQLite writer time for each renewal).
const manyLeases = 16

// checkManyLeases: one Locker keeps many leases alive at once, exclusive
// and shared, through several TTLs; none ends, and another Locker is
// refused each key. Where the Locker is an Admin, a key forced free among
// them ends that lease alone, lost, within about a TTL.
func checkManyLeases(e *env) error {
	a, b, err := e.two()
	if err != nil {
		return err
	}
	// Twice the harness's TTL: what is checked is that many leases live on
	// together, and in a full -race run a 1 s lease's renewal (due after
	// 333 ms, late after 1 s) was seen to miss on Postgres and SQLite.
	ttl := 2 * e.h.ttl()
	leases := make([]locker.Lease, manyLeases)
	for i := range leases {
		var opts []locker.Option
		if i%4 == 3 {
			opts = append(opts, locker.Shared())
		}
		if leases[i], err = e.tryLock(a, fmt.Sprintf("%sm%d", e.prefix, i), append(opts, locker.WithTTL(ttl))...); err != nil {
			return err
		}
	}
	if err := e.outlive(leases, 3*ttl); err != nil {
		return err
	}
	for _, l := range leases {
		if _, err := b.TryLock(e.ctx, l.Key()); !errors.Is(err, locker.ErrLocked) {
			e.errorf("kept-alive key %q: another Locker's TryLock = %v, want ErrLocked", l.Key(), err)
		}
	}
	if adm, ok := a.(locker.Admin); ok {
		if err := adm.ForceUnlock(e.ctx, leases[0].Key()); err != nil {
			return fmt.Errorf("ForceUnlock(%q): %w", leases[0].Key(), err)
		}
		select {
		case <-leases[0].Done():
			if !errors.Is(leases[0].Err(), locker.ErrLeaseLost) {
				e.errorf("forced lease: Err() = %v, want ErrLeaseLost", leases[0].Err())
			}
		case <-time.After(3 * ttl):
			e.errorf("lease of %q still open 3×TTL after ForceUnlock", leases[0].Key())
		}
		if err := e.outlive(leases[1:], 0); err != nil {
			return err
		}
		leases = leases[1:]
	}
	for _, l := range leases {
		if err := e.unlock(l); err != nil {
			return err
		}
	}
	return nil
}

// outlive waits for d, then reports a lease that ended meanwhile.
func (e *env) outlive(leases []locker.Lease, d time.Duration) error {
	select {
	case <-time.After(d):
	case <-e.ctx.Done():
		return e.ctx.Err()
	}
	for _, l := range leases {
		select {
		case <-l.Done():
			return fmt.Errorf("kept-alive lease of %q ended: %v", l.Key(), l.Err())
		default:
		}
		if !l.Deadline().After(time.Now()) {
			e.errorf("kept-alive lease of %q: Deadline %v is in the past", l.Key(), l.Deadline())
		}
	}
	return nil
}
