package conformance

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/locker-go/locker"
)

// nearDeadline is how long before a lapsing holder's Deadline the other
// client starts trying its key without pause.
const nearDeadline = 3 * time.Millisecond

// Nobody else is granted a key before its holder's Deadline: a lease left
// to lapse (no keep-alive), its TTL not a whole number of milliseconds,
// while another client tries the key without pause from just before the
// Deadline, three times for each pair of holder and taker: exclusive after
// exclusive and, with modes, after shared, and shared and Limited (which a
// Limiter decides apart) after exclusive. A TryLock that returns a lease
// before the Deadline fails the check. (A backend whose clock counts whole
// milliseconds and records a grant's moment rounded down lets the key go
// up to a millisecond early, most times: the history check met it once in
// twenty runs.)
func checkNoGrantBeforeDeadline(e *env) error {
	a, b, err := e.two()
	if err != nil {
		return err
	}
	type pair struct {
		name       string
		hold, take []locker.Option
	}
	pairs := []pair{{"exclusive", nil, nil}}
	if !e.h.NoModes {
		shared := []locker.Option{locker.Shared()}
		pairs = append(pairs, pair{"shared", shared, nil}, pair{"exclusive, taken shared", nil, shared},
			pair{"exclusive, taken by a Limit", nil, []locker.Option{locker.Limit(2)}})
	}
	// Not a whole number of milliseconds: a backend that keeps whole
	// milliseconds must not count the fraction.
	ttl := e.h.ttl() + 900*time.Microsecond
	errs := make([]error, len(pairs))
	var wg sync.WaitGroup
	for i, p := range pairs {
		wg.Go(func() {
			// The pairs at once, a quarter of a TTL apart: the takers'
			// spins near their Deadlines do not meet.
			select {
			case <-time.After(time.Duration(i) * e.h.ttl() / 4):
			case <-e.ctx.Done():
				errs[i] = e.ctx.Err()
				return
			}
			for round := range 3 {
				key := fmt.Sprintf("%s%d-%d", e.prefix, i, round)
				opts := append([]locker.Option{locker.WithTTL(ttl), locker.WithKeepAlive(false)}, p.hold...)
				old, err := e.tryLock(a, key, opts...)
				if err == nil {
					err = e.takeAtDeadline(b, old, p.name, p.take...)
				}
				if err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// takeAtDeadline tries old's key with b (with opts) without pause from
// just before old's Deadline until b holds it, and reports a grant that
// came before the Deadline. A mode mismatch (a Limit meeting another
// mode's holder) is a refusal here.
func (e *env) takeAtDeadline(b locker.Locker, old locker.Lease, how string, opts ...locker.Option) error {
	deadline := old.Deadline()
	select { // the clock, not another goroutine, is what this waits for
	case <-time.After(time.Until(deadline.Add(-nearDeadline))):
	case <-e.ctx.Done():
		return e.ctx.Err()
	}
	for {
		next, err := b.TryLock(e.ctx, old.Key(), opts...)
		switch {
		case err == nil:
			if early := deadline.Sub(time.Now()); early > 0 {
				e.errorf("the key of a lapsing holder (%s; fence %d) was granted (fence %d) %v before its Deadline",
					how, old.Fence(), next.Fence(), early)
			}
			return e.unlock(next)
		case !errors.Is(err, locker.ErrLocked) && !errors.Is(err, locker.ErrModeMismatch):
			return fmt.Errorf("TryLock(%q): %w", old.Key(), err)
		case time.Since(deadline) > e.h.ttl()+slack:
			return fmt.Errorf("the key of a lapsing holder (%s) is not free %v after its Deadline", how, e.h.ttl()+slack)
		}
	}
}
