package driver

// Lock modes and key spaces: what a driver that keeps modes (ModeKeeper)
// grants, and by which rule. The portable Locker builds every composite
// shape from them: a shared lock is one request in Shared mode; a subtree
// lock on "a/b/c" is IntentExclusive (or IntentShared) on the Subtree keys
// "a" and "a/b" and Exclusive (or Shared) on "a/b/c", multiple-granularity
// locking as in Gray et al.; LockAll is several requests taken together.

// Mode is how a request holds its key. The zero value is Exclusive, so a
// driver that ignores Mode locks more, never less.
type Mode uint8

const (
	// Exclusive (X) excludes every other holder.
	Exclusive Mode = iota
	// Shared (S) admits other Shared and IntentShared holders.
	Shared
	// IntentShared (IS) is held on a subtree path's ancestors by a Shared
	// subtree lock below them.
	IntentShared
	// IntentExclusive (IX) is held on a subtree path's ancestors by an
	// Exclusive subtree lock below them.
	IntentExclusive
)

// Modes lists every mode, in the order of their values.
var Modes = [...]Mode{Exclusive, Shared, IntentShared, IntentExclusive}

// compatible is the matrix of multiple-granularity locking: whether two
// holders of one key, in these modes, may hold it at once.
var compatible = [4][4]bool{
	//                 X      S      IS     IX
	Exclusive:       {false, false, false, false},
	Shared:          {false, true, true, false},
	IntentShared:    {false, true, true, true},
	IntentExclusive: {false, false, true, true},
}

// Compatible reports whether a holder in mode m and one in mode o may hold
// one key at once. It is symmetric; an unknown mode is compatible with
// nothing.
func (m Mode) Compatible(o Mode) bool {
	return int(m) < len(compatible) && int(o) < len(compatible) && compatible[m][o]
}

// Intent reports whether m is an intention mode (IS, IX).
func (m Mode) Intent() bool { return m == IntentShared || m == IntentExclusive }

// String is the mode's usual abbreviation: X, S, IS or IX.
func (m Mode) String() string {
	switch m {
	case Exclusive:
		return "X"
	case Shared:
		return "S"
	case IntentShared:
		return "IS"
	case IntentExclusive:
		return "IX"
	case Limited:
		return "L"
	}
	return "invalid mode"
}

// Space is a namespace of keys: the same string in two spaces names two
// independent locks. Its zero value is Plain, so a driver that ignores
// Space puts every key in one space and locks more, never less.
type Space uint8

const (
	// Plain keys are opaque strings.
	Plain Space = iota
	// Subtree keys are '/'-separated paths, each node of a subtree lock.
	Subtree
)

// String names the space: "plain", "subtree" or "election".
func (s Space) String() string {
	switch s {
	case Subtree:
		return "subtree"
	case Election:
		return "election"
	}
	return "plain"
}

// ModeKeeper is implemented by drivers that grant by Request.Mode and keep
// Request.Space apart. Such a driver keeps a set of holders per key and
// space, each holder an owner in one mode with its holds, fence and expiry,
// and grants request r (one attempt of Acquire or AcquireBatch) by this
// rule, applied atomically:
//
//  1. Re-entry: if r.Reentrant and r.Owner holds the key in r.Mode, r's
//     hold joins that holder's (same fence, expiry never shortened); no
//     other holder or waiter is consulted.
//  2. Mismatch: if r.Reentrant and r.Owner holds the key in another mode,
//     Acquire fails with an error matching locker.ErrModeMismatch and
//     changes nothing.
//  3. Grant: else, if r.Mode is Compatible with the mode of every live
//     holder, and with that of every live waiter queued before r (a
//     request that is not queued, such as a TryLock, comes after every
//     waiter), r becomes a new holder with a new fence, and leaves the
//     queue.
//  4. Refusal: else r is refused; if r.Queue is set it takes, or keeps, its
//     place in the key's queue, with its mode.
//
// Where the backend orders waiters by arrival (a sequence, a revision),
// rule 3 reads: compatible with every live entry before r's. A shared
// request arriving after a queued exclusive waiter waits behind it, so
// writers are never starved; several compatible waiters at the head of a
// queue are granted together, and a release notifies each waiter it may
// have admitted (every one that rule 3 would now grant).
//
// Fences: every grant to a new holder in Exclusive or Shared mode draws a
// fence above every earlier grant of its key (an intention holder's fence
// is never a lease's: a driver may draw none for it); in the Subtree space
// the counter must be shared by every key that shares a first path segment
// (one counter for the space, or for the backend, will do), so that a
// subtree lock's fence, its last node's, rises across every conflicting
// lock of the tree.
//
// LockInfo reports a key's Shared and Exclusive holders (not intention
// holders) and its Space; Admin's List includes the Subtree space.
type ModeKeeper interface {
	KeepsModes()
}
