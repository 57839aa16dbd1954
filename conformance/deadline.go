package conformance

import (
	"errors"
	"fmt"
	"time"

	"github.com/locker-go/locker"
)

// nearDeadline is how long before a lapsing holder's Deadline the other
// client starts trying its key without pause.
const nearDeadline = 3 * time.Millisecond

// Nobody else is granted a key before its holder's Deadline: a lease left
// to lapse (no keep-alive), exclusive and, with modes, shared, three times
// each, while another client tries the key without pause from just before
// the Deadline; a TryLock that returns a lease before it fails the check.
// (A backend whose clock counts whole milliseconds and records a grant's
// moment rounded down lets the key go up to a millisecond early, most
// times: the history check met it once in twenty runs.)
func checkNoGrantBeforeDeadline(e *env) error {
	a, b, err := e.two()
	if err != nil {
		return err
	}
	modes := map[string][]locker.Option{"exclusive": nil}
	if !e.h.NoModes {
		modes["shared"] = []locker.Option{locker.Shared()}
	}
	for name, mode := range modes {
		for round := range 3 {
			key := fmt.Sprintf("%s%s%d", e.prefix, name, round)
			opts := append([]locker.Option{locker.WithTTL(e.h.ttl()), locker.WithKeepAlive(false)}, mode...)
			old, err := e.tryLock(a, key, opts...)
			if err != nil {
				return err
			}
			if err := e.takeAtDeadline(b, old, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// takeAtDeadline tries old's key with b without pause from just before
// old's Deadline until b holds it, and reports a grant that came before
// the Deadline.
func (e *env) takeAtDeadline(b locker.Locker, old locker.Lease, how string) error {
	deadline := old.Deadline()
	select { // the clock, not another goroutine, is what this waits for
	case <-time.After(time.Until(deadline.Add(-nearDeadline))):
	case <-e.ctx.Done():
		return e.ctx.Err()
	}
	for {
		next, err := b.TryLock(e.ctx, old.Key())
		switch {
		case err == nil:
			if early := deadline.Sub(time.Now()); early > 0 {
				e.errorf("the key of a lapsing %s holder (fence %d) was granted (fence %d) %v before its Deadline",
					how, old.Fence(), next.Fence(), early)
			}
			return e.unlock(next)
		case !errors.Is(err, locker.ErrLocked):
			return fmt.Errorf("TryLock(%q): %w", old.Key(), err)
		case time.Since(deadline) > e.h.ttl()+slack:
			return fmt.Errorf("the key of a lapsing %s holder is not free %v after its Deadline", how, e.h.ttl()+slack)
		}
	}
}
