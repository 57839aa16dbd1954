package locker

import (
	"fmt"
)

// Limit makes the key a counting semaphore: up to n leases hold it at once,
// and the (n+1)-th waits (in arrival order where the backend queues) or is
// refused by TryLock with ErrLocked. Every grant has a fence above every
// earlier grant of the key; a crashed holder's slot frees within its TTL;
// re-entry (WithOwner) takes no second slot. Limit(1) is exclusive. Every
// holder of a key must ask for the same n, and Limit does not combine
// with Shared, Subtree or Campaign: ErrModeMismatch. n below 1 is
// ErrInvalidOption. Over a driver that keeps no limits (no
// driver.Limiter) a Limit lease is exclusive: more is locked, never less.
func Limit(n int) Option { return func(o *Options) { o.Limit, o.limited = n, true } }

// checkLimit refuses a Limit out of range, or beside an option it does not
// combine with.
func checkLimit(o Options) error {
	switch {
	case !o.limited:
		return nil
	case o.Limit < 1:
		return fmt.Errorf("%w: Limit(%d): want 1 or more", ErrInvalidOption, o.Limit)
	case o.Limit > 1 && (o.Shared || o.Subtree || o.election):
		return fmt.Errorf("%w: Limit(%d) does not combine with Shared, Subtree or Campaign", ErrModeMismatch, o.Limit)
	}
	return nil
}

// limited reports whether o asks d for a Limited request: Limit(n > 1)
// over a driver.Limiter (Limit(1) is Exclusive, and so is any Limit over a
// driver that keeps no limits).
func (p *portable) limited(o Options) bool { return o.Limit > 1 && p.limits }
