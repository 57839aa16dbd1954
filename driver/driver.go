// Package driver is the seam between the portable locker.Locker and a lock
// backend, in the spirit of database/sql/driver and gocloud.dev's driver
// packages. A backend implements Driver (and, where it can, the optional
// interfaces below); locker.New turns it into a locker.Locker that does
// everything that is the same on every backend: key, option and TTL
// validation, the Deadline/Done/Err timer, keep-alive, waiting for a
// notified release, Close, and error mapping.
//
// This package imports nothing of locker, so that locker can import it. A
// driver returns locker's errors where this page names them
// (locker.ErrNotHeld, locker.Unavailable(cause)); import both packages.
//
// What a driver must guarantee (the conformance package checks it):
//   - Acquire grants a key to at most one owner at a time, and a grant to
//     a new owner carries a Fence above every earlier grant of the key.
//   - A grant lapses by itself within its validity unless refreshed, even
//     if this process dies: no goodbye is needed.
//   - Refresh and Release act only on the hold they belong to; a hold that
//     is no longer ours answers an error matching locker.ErrNotHeld and
//     changes nothing.
//   - A refused Acquire with r.Queue set keeps the call's place (if the
//     backend queues) until the call's next Acquire or its Abandon.
package driver

import (
	"context"
	"errors"
	"time"
)

// Driver is what a backend must provide.
type Driver interface {
	// Acquire makes one attempt to take r.Key for r.Owner. A refusal (the
	// key is held by another owner) is no error: Grant.Hold is nil. A
	// driver that queues waiters itself (ZooKeeper, etcd) may block in
	// Acquire until the key is granted when r.Wait is set; if ctx ends
	// while it waits behind another owner, its error matches both
	// locker.ErrLocked and ctx.Err().
	Acquire(ctx context.Context, r *Request) (Grant, error)
	// Abandon undoes what a Lock or TryLock call that failed may have
	// left: its place in a queue, or a hold granted whose reply was lost.
	// ctx is fresh and bounded; Abandon must not act on other calls' holds.
	Abandon(ctx context.Context, r *Request)
	// Close releases the driver's resources. The portable Locker calls it
	// once, after every hold was released and no call is under way.
	Close(ctx context.Context) error
}

// Request is one Lock or TryLock call, the same value through all of its
// attempts.
type Request struct {
	Key   string // valid and opaque: no character has a special meaning
	Owner string // owner token
	// Mode is how the key is to be held (a ModeKeeper's concern; others
	// grant every request as Exclusive). Space is the key's namespace.
	Mode  Mode
	Space Space
	// Reentrant: Owner is a stable identity (WithOwner), so a key it holds
	// is granted again with the same fence and one more hold (by the
	// backend, or by the portable Locker for a Reenterer's hold).
	Reentrant bool
	// ID is unique to this call: the id of the hold it takes, and its name
	// in a queue.
	ID        string
	TTL       time.Duration
	KeepAlive bool // the lease will be renewed every TTL/3
	Wait      bool // Lock, not TryLock
	// Queue is set once the call listens for notifications (Notifier): a
	// refused attempt may then take, and keep, a place in the key's queue.
	Queue bool
	// Limit is the n of a Limited request (locker.Limit): at most n
	// holders (a Limiter's concern; 0 in every other request).
	Limit int
	// Floor, if not zero, is a fence the grant must exceed if it is a new
	// grant of the key (a FenceFloorer's concern: the portable Locker
	// sends it to no other driver).
	Floor uint64
	// State is the driver's own, kept between the attempts of one call.
	State any
}

// Grant is the outcome of one attempt.
type Grant struct {
	Hold  Hold // nil: refused, another owner holds the key
	Fence uint64
	// Start is when Validity starts to run; zero: when Acquire was called.
	Start time.Time
	// Validity is how long the hold is known valid from Start; zero: TTL.
	Validity time.Duration
	// Lost, if not nil, is done when the backend says the hold is gone (a
	// session expired, a node deleted): the lease then ends lost. A
	// context, which the Locker watches with context.AfterFunc: no
	// goroutine waits on it per lease.
	Lost context.Context
	// Retry, for a refusal, is how long until the holder's lease would
	// lapse: the waiter looks again then at the latest, should no
	// notification come. Zero (or less): look again soon; the waiter backs
	// off while such refusals repeat.
	Retry time.Duration
}

// Hold is one granted hold's backend calls. The portable lease never runs
// two of them at once.
type Hold interface {
	// Refresh extends the hold by its TTL and returns how long it is now
	// valid from when the call began; locker.ErrNotHeld if it is not ours.
	Refresh(ctx context.Context) (time.Duration, error)
	// Release drops the hold; locker.ErrNotHeld if it was not ours.
	Release(ctx context.Context) error
}

// Notifier is implemented by drivers that can tell a waiter when a key may
// have come free, so Lock waits without polling.
type Notifier interface {
	// Subscribe starts notifications for r's key (or r's own turn) and
	// returns once they are live, so that no release after it returns is
	// missed. wake must buffer one signal; stop ends the subscription.
	Subscribe(ctx context.Context, r *Request) (wake <-chan struct{}, stop func(), err error)
	// Listening reports whether Subscribe costs no round trip now: Lock
	// then subscribes before its first attempt, and queues from the start.
	Listening() bool
}

// KeyListener is implemented by Notifiers for which whether Subscribe
// costs a round trip depends on the request: a Redis Cluster Locker
// subscribes each lock's shard channel, and keeps it a while after its
// last waiter. Lock then asks ListeningFor(r) in place of Listening, so
// that a key waited for again and again subscribes and queues from its
// first attempt, and a key nobody waited for lately still costs an
// uncontended Lock one round trip.
type KeyListener interface {
	Notifier
	// ListeningFor reports whether Subscribe(ctx, r) costs no round trip now.
	ListeningFor(r *Request) bool
}

// Expirer is implemented by holds that the backend does not end by itself
// at the deadline (a ZooKeeper node lives as long as its session): Expire
// is called once, when the lease reaches its deadline unrenewed, after any
// other call of the hold; and, in the background, for a hold the Locker
// gives back unused (a grant that arrived past its validity, a LockAll's
// grants it lets go) whose Release failed. (A hold the backend reported
// gone, through Grant.Lost or ErrNotHeld, gets no Expire.)
type Expirer interface {
	Expire(ctx context.Context)
}

// Reenterer is implemented by holds whose backend does not count an
// owner's re-entry (a ZooKeeper lock node is one hold however often its
// owner re-enters it). The portable Locker then counts re-entry per
// Locker: a Reentrant request for a key its owner holds through this
// Locker is granted by Reenter, not Acquire, and the leases share the
// backend hold: one Fence and Lost, one backend call at a time, and only
// the last of them to be released (or to expire) releases it.
type Reenterer interface {
	// Reenter checks that the hold can take r, a re-entry by its owner,
	// and returns r's grant: a Hold that makes this hold's backend calls
	// for r's lease (its TTL and KeepAlive), with Start and Validity. A
	// grant without a Hold says the hold is gone: r is acquired anew.
	// Reenter leaves nothing to undo, and may be called after the lease of
	// this very Hold was released, while another lease shares it.
	Reenter(ctx context.Context, r *Request) (Grant, error)
}

// FenceFloorer is implemented by drivers that can keep a key's fences
// above a floor: what a Migration needs of both of its sides, so that a
// key's fences keep rising as processes move from one backend to the
// other, whatever each backend's own counter was. A driver without it
// cannot be migrated to or from (the Locker answers errors.ErrUnsupported).
// Besides RaiseFence, it honours Request.Floor in Acquire.
type FenceFloorer interface {
	// RaiseFence makes every later new grant of key in space carry a fence
	// above floor; the fences of live holds are unchanged. Raising to a
	// floor below the key's counter changes nothing.
	RaiseFence(ctx context.Context, space Space, key string, floor uint64) error
}

// Batcher is implemented by drivers that can take several keys in one
// call, all or none: the fast path of LockAll and of subtree locks.
type Batcher interface {
	// AcquireBatch makes one attempt at every request of rs, which name
	// distinct keys (or one key in distinct spaces) and share Owner,
	// Reentrant, TTL and KeepAlive; none waits or queues. Each request is
	// granted as Acquire would grant it alone, and either every one is
	// granted or none is: then no Grant has a Hold, and those refused
	// carry Retry. An error matching locker.ErrModeMismatch fails the
	// batch as it fails Acquire. ErrSkip declines the batch (its keys lie
	// on several shards, say): the Locker then takes the keys one by one,
	// in order.
	AcquireBatch(ctx context.Context, rs []*Request) ([]Grant, error)
	// ReleaseBatch releases hs, holds this driver granted, in that order
	// (a subtree lease's own node first), in one call: errs[i] is what
	// hs[i].Release would have answered. An error for the call as a whole
	// leaves every hold to be released again; ErrSkip declines (a hold is
	// not the driver's own, say): the Locker then releases them one by one.
	ReleaseBatch(ctx context.Context, hs []Hold) (errs []error, err error)
}

// BatchRefresher is implemented by drivers that can renew many holds in
// one backend call: the keep-alive of a Locker with many leases then costs
// calls per tick, not per lease. The portable Locker gathers the holds
// whose renewal is due (and those due soon, so that renewals fall on the
// same ticks) and hands them over together.
type BatchRefresher interface {
	// RefreshBatch does what Refresh would do for each of hs, holds this
	// driver granted, as few backend calls as it can: out[i] is what
	// hs[i].Refresh would have answered. An out[i].Err of ErrSkip declines
	// that hold (not the driver's own, say, or in a mode it renews alone):
	// the Locker refreshes it by itself. An error for the call as a whole
	// counts as that error for every hold.
	RefreshBatch(ctx context.Context, hs []Hold) (out []Refreshed, err error)
}

// Sharder is implemented by BatchRefreshers whose holds live on several
// independent servers (a Redis Cluster's masters): the Locker renews each
// shard's holds in a RefreshBatch of their own, all at once, so that a
// server that hangs delays the renewals of its own holds alone.
type Sharder interface {
	// Shard names the server of hold h: holds with one name share a call.
	Shard(h Hold) string
}

// Refreshed is one hold's outcome in a RefreshBatch: as Refresh answers.
type Refreshed struct {
	Valid time.Duration
	Err   error
}

// ErrSkip is returned by an optional fast path that declines at run time,
// as database/sql/driver.ErrSkip is: the caller takes the general path.
var ErrSkip = errors.New("driver: fast path declined")

// LockInfo describes one held lock as the backend records it.
type LockInfo struct {
	Key   string
	Owner string
	// Label describes the holder (locker.WithLabel); the Locker fills it
	// in from the owner token the driver reports.
	Label string
	Fence uint64
	// Holds is the hold count of a re-entered lock (1 when not re-entered).
	Holds int
	// Expires is when the lock lapses unless refreshed; zero where the
	// backend ties the lock to a session instead (ZooKeeper).
	Expires time.Time
	// Waiters is the number of queued waiters, where the backend queues.
	Waiters int
	// Mode is Exclusive, Shared or Limited: for the last two Owner,
	// Fence, Holds and Expires are those of the holder with the lowest
	// fence, and Holders lists every one.
	Mode Mode
	// Space is the key's: Subtree for a subtree lock on the path Key.
	Space Space
	// Limit is a Limited key's n: at most n holders (locker.Limit).
	Limit int
	// Holders lists the holders of a Shared lock, by fence; drivers may
	// leave it nil for an Exclusive one (the Locker fills it in).
	Holders []Holder
}

// Holder is one holder of a lock: an owner with its fence, hold count and
// expiry (zero where the backend ties it to a session).
type Holder struct {
	Owner   string
	Label   string // see LockInfo.Label
	Fence   uint64
	Holds   int
	Expires time.Time
}

// Admin is implemented by drivers that can inspect and force locks, for
// operators (locker.Admin). Keys are validated before they reach it. A
// driver that is no ModeKeeper is asked about the Plain space only.
type Admin interface {
	// Status returns the holders of key in space (Shared or Exclusive;
	// intention holders are not locks of their own), or locker.ErrNotHeld.
	Status(ctx context.Context, space Space, key string) (LockInfo, error)
	// List returns the held locks whose keys begin with prefix, in any
	// order, in every space.
	List(ctx context.Context, prefix string) ([]LockInfo, error)
	// ForceUnlock removes the Shared and Exclusive holds of key in space
	// whoever has them; locker.ErrNotHeld if there are none.
	ForceUnlock(ctx context.Context, space Space, key string) error
}
