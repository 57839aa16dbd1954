package locker

import (
	"context"

	"github.com/locker-go/locker/driver"
)

// LockInfo describes one held lock as the backend records it: key, mode
// (exclusive or shared), space (a subtree lock's path), its holders (one,
// or every holder of a shared lock) with their owners, fences, hold counts
// and expiries (zero for session-bound locks), and queued waiters. Owner,
// Fence, Holds and Expires repeat those of the holder with the lowest
// fence.
type LockInfo = driver.LockInfo

// Holder is one holder of a lock, as LockInfo.Holders lists them.
type Holder = driver.Holder

// Admin is implemented by the Locker of every adapter whose driver
// implements driver.Admin (all of this module's) for operators: the CLI's
// status, list and unlock --force use it. Check for it with a type assertion.
type Admin interface {
	// Status returns the holders of key, or ErrNotHeld if nobody holds
	// it. With Subtree(), key is the path of a subtree lock.
	Status(ctx context.Context, key string, opts ...Option) (LockInfo, error)
	// List returns the held locks whose keys begin with prefix, plain keys
	// and subtree paths, sorted by key.
	List(ctx context.Context, prefix string) ([]LockInfo, error)
	// ForceUnlock releases key whoever holds it (every holder of a shared
	// lock; with Subtree(), the subtree lock on the path key). The holders'
	// leases are then reported lost (ErrLeaseLost) at their next refresh
	// or notification. It returns ErrNotHeld if nobody held key.
	ForceUnlock(ctx context.Context, key string, opts ...Option) error
}

// Mode is a lock's mode, as LockInfo reports it; Space its namespace.
type (
	Mode  = driver.Mode
	Space = driver.Space
)

// The modes and spaces of LockInfo.
const (
	ModeExclusive = driver.Exclusive
	ModeShared    = driver.Shared
	// ModeLimited is a semaphore's (Limit): LockInfo.Limit is its n.
	ModeLimited  = driver.Limited
	SpacePlain   = driver.Plain
	SpaceSubtree = driver.Subtree
	// SpaceElection holds elections (Campaign): Key is the election's name.
	SpaceElection = driver.Election
)
