package locker

import (
	"context"

	"github.com/locker-go/locker/driver"
)

// LockInfo describes one held lock as the backend records it: key,
// owner, fence, hold count, expiry (zero for session-bound locks) and
// queued waiters.
type LockInfo = driver.LockInfo

// Admin is implemented by the Locker of every adapter whose driver
// implements driver.Admin (all of this module's) for operators: the CLI's
// status, list and unlock --force use it. Check for it with a type assertion.
type Admin interface {
	// Status returns the holder of key, or ErrNotHeld if nobody holds it.
	Status(ctx context.Context, key string) (LockInfo, error)
	// List returns the held locks whose keys begin with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]LockInfo, error)
	// ForceUnlock releases key whoever holds it. The holder's lease is then
	// reported lost (ErrLeaseLost) at its next refresh or notification.
	// It returns ErrNotHeld if nobody held key.
	ForceUnlock(ctx context.Context, key string) error
}
