package locker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Locker acquires distributed locks on string keys.
//
// Implementations are safe for concurrent use. Each Locker is one client of
// its backend (one connection or session), like a separate process.
type Locker interface {
	// Lock blocks until key is held or ctx ends (then returns an error that
	// errors.Is ctx.Err()). It waits by backend notification, never by fixed polling.
	Lock(ctx context.Context, key string, opts ...Option) (Lease, error)
	// TryLock makes one attempt and returns ErrLocked if another owner holds key.
	TryLock(ctx context.Context, key string, opts ...Option) (Lease, error)
	// Close releases the client's resources; held leases are unlocked best-effort.
	Close() error
}

// Lease is one held lock.
type Lease interface {
	// Key is the locked key, as given to Lock.
	Key() string
	// Owner is the owner token: random unless WithOwner was given.
	Owner() string
	// Fence is the fencing token. It strictly increases every time the key
	// passes to a new owner; re-entry by the same owner keeps it.
	Fence() uint64
	// Deadline is until when the lease is known valid, by the local clock.
	Deadline() time.Time
	// Refresh extends the lease by its TTL; ErrNotHeld if it is no longer ours.
	Refresh(ctx context.Context) error
	// Unlock releases the lease (one hold of it, for a re-entered key).
	// It returns ErrNotHeld if the lease was no longer ours.
	Unlock(ctx context.Context) error
	// Done is closed when the lease ends: unlocked, expired or lost.
	Done() <-chan struct{}
	// Err is nil while the lease is held, ErrNotHeld after Unlock, and
	// ErrLeaseLost when the lease expired or its session died first.
	Err() error
}

// Errors returned by every adapter; match them with errors.Is.
var (
	ErrLocked      = errors.New("locker: key is locked by another owner")
	ErrNotHeld     = errors.New("locker: lease is not held")
	ErrLeaseLost   = errors.New("locker: lease lost")
	ErrInvalidKey  = errors.New("locker: invalid key")
	ErrInvalidTTL  = errors.New("locker: invalid TTL")
	ErrClosed      = errors.New("locker: locker is closed")
	ErrUnavailable = errors.New("locker: backend unavailable")
	// ErrInvalidOwner reports an owner id that breaks the key rules.
	ErrInvalidOwner = errors.New("locker: invalid owner")
	// ErrModeMismatch reports an owner asking, by WithOwner, for a key it
	// holds in the other mode (shared against exclusive, or a subtree lock
	// crossing one it holds in the other mode): upgrading a shared lease
	// in place could deadlock two owners that both try it, so unlock and
	// lock again instead. It also reports a Limit(n) key asked for with
	// another n or in another mode, by any owner, and Limit given with
	// Shared, Subtree or Campaign.
	ErrModeMismatch = errors.New("locker: key is held in another mode")
	// ErrInvalidOption reports an option out of range or out of place,
	// such as Shared or Subtree given to Campaign.
	ErrInvalidOption = errors.New("locker: invalid option")
)

// Unavailable wraps cause so that it matches both ErrUnavailable and cause.
func Unavailable(cause error) error {
	if cause == nil || errors.Is(cause, ErrUnavailable) {
		return cause
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, cause)
}

// Limits of keys, owners and TTLs.
const (
	DefaultTTL = 15 * time.Second
	MaxTTL     = 24 * time.Hour
	MaxKeyLen  = 512
)

// Options is the resolved form of a list of Option. Adapters obtain it
// through Resolve.
type Options struct {
	TTL       time.Duration
	KeepAlive bool
	// Owner is the owner token; Resolve fills in a random one.
	Owner string
	// StableOwner is true when Owner came from WithOwner, so re-entry is possible.
	StableOwner bool
	// Shared asks for a shared (read) lease: see Shared.
	Shared bool
	// Subtree says the key is a path whose whole subtree is locked: see Subtree.
	Subtree bool
	// FenceFloor is a fence that a new grant must exceed: see WithFenceFloor.
	FenceFloor uint64
	// Label describes the holder for operators: see WithLabel.
	Label string
	// Limit is the n of Limit(n): at most n leases hold the key at once
	// (0: not a semaphore; 1: exclusive).
	Limit int

	election bool // the key is an election's name: see Campaign
	limited  bool // Limit was given (Limit(0) is invalid, not unset)
}

// Option configures one Lock or TryLock call.
type Option func(*Options)

// WithTTL sets the lease length (default 15s); it must be in (0, 24h].
func WithTTL(d time.Duration) Option { return func(o *Options) { o.TTL = d } }

// WithKeepAlive turns the renewal of the lease every TTL/3 on or off (default on).
func WithKeepAlive(on bool) Option { return func(o *Options) { o.KeepAlive = on } }

// WithOwner sets a stable owner identity: re-locking a key this owner holds
// succeeds with the same fence and one more hold; each Unlock drops one hold.
func WithOwner(id string) Option {
	return func(o *Options) { o.Owner, o.StableOwner = id, true }
}

// WithFenceFloor asks that the lease's fence be above floor if the key
// passes to a new owner (a re-entry keeps its fence), as Migration asks of
// its new side. A Locker whose backend cannot honour it (see FenceRaiser)
// answers an error matching errors.ErrUnsupported, taking nothing.
func WithFenceFloor(floor uint64) Option { return func(o *Options) { o.FenceFloor = floor } }

// Shared asks for a shared (read) lease: any number of shared leases hold
// a key together, while an exclusive lease excludes every other. Writers
// are not starved: a shared request arriving after a queued exclusive
// waiter waits behind it, and TryLock(Shared) answers ErrLocked while an
// exclusive lease holds or waits. Every grant, shared or exclusive, has a
// fence above every earlier grant of the key.
func Shared() Option { return func(o *Options) { o.Shared = true } }

// Subtree makes the key a '/'-separated path and the lease cover it and
// every path below it: "a/b" covers "a/b/c/d" but not "a/bc". Two subtree
// leases conflict when one path equals or lies below the other and either
// is exclusive; with Shared, a subtree lease is a read lock on the
// subtree. Subtree paths are a namespace of their own, apart from plain
// keys. A path with an empty segment or a leading or trailing '/' is
// ErrInvalidKey. The cost grows with the path's depth, never with the
// number of locks held.
func Subtree() Option { return func(o *Options) { o.Subtree = true } }

// Resolve checks key and the options and fills in the defaults. Adapters call
// it first, so bad input changes nothing in the backend.
func Resolve(key string, opts ...Option) (Options, error) {
	o := Options{TTL: DefaultTTL, KeepAlive: true}
	for _, opt := range opts {
		opt(&o)
	}
	if err := validate(key, o.Subtree); err != nil {
		return Options{}, err
	}
	if err := checkElection(key, o); err != nil {
		return Options{}, err
	}
	if err := checkLimit(o); err != nil {
		return Options{}, err
	}
	if o.TTL <= 0 || o.TTL > MaxTTL {
		return Options{}, fmt.Errorf("%w: %v is outside (0, %v]", ErrInvalidTTL, o.TTL, MaxTTL)
	}
	if !o.StableOwner {
		o.Owner = rand.Text()
	} else if err := checkString(o.Owner); err != nil {
		return Options{}, fmt.Errorf("%w: %v", ErrInvalidOwner, err)
	}
	if err := checkLabel(o); err != nil {
		return Options{}, err
	}
	return o, nil
}

// ValidateKey reports ErrInvalidKey for a key that is empty, over 512 bytes,
// not valid UTF-8 or holding a NUL byte. Any other key is valid and opaque:
// no character has a special meaning.
func ValidateKey(key string) error {
	if err := checkString(key); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	return nil
}

// ValidatePath reports ErrInvalidKey for a subtree path that breaks the
// key rules or has an empty segment: a leading or trailing '/', or "//".
func ValidatePath(path string) error {
	if err := ValidateKey(path); err != nil {
		return err
	}
	if strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") || strings.Contains(path, "//") {
		return fmt.Errorf("%w: subtree path %q has an empty segment", ErrInvalidKey, path)
	}
	return nil
}

// validate is ValidateKey, or ValidatePath for a subtree path.
func validate(key string, subtree bool) error {
	if subtree {
		return ValidatePath(key)
	}
	return ValidateKey(key)
}

func checkString(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > MaxKeyLen:
		return fmt.Errorf("%d bytes, over %d", len(s), MaxKeyLen)
	case !utf8.ValidString(s):
		return errors.New("not valid UTF-8")
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return errors.New("holds a NUL byte")
		}
	}
	return nil
}
