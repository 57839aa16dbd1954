package locker

import (
	"context"
	"time"
)

// LockInfo describes one held lock as the backend records it.
type LockInfo struct {
	Key   string
	Owner string
	Fence uint64
	// Holds is the hold count of a re-entered lock (1 when not re-entered).
	Holds int
	// Expires is when the lock lapses unless refreshed; zero where the
	// backend ties the lock to a session instead (ZooKeeper).
	Expires time.Time
	// Waiters is the number of queued waiters, where the backend queues.
	Waiters int
}

// Admin is implemented by every adapter's Locker for operators: the CLI's
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
