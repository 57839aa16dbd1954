package driver

import "fmt"

// Limited is the mode of a semaphore's holders (locker.Limit(n), n > 1):
// up to Request.Limit of them hold a key together. It is no mode of the
// multiple-granularity matrix (Modes does not list it, and Compatible
// finds it compatible with nothing), so a ModeKeeper that does not keep
// limits grants it as it would an unknown mode, alone: more is locked,
// never less. The portable Locker sends it only to a Limiter.
const Limited Mode = 4

// Limiter is implemented by ModeKeepers that grant Limited requests. For
// a request r in Limited mode with r.Limit = n, ModeKeeper's rule reads:
//
//  1. Re-entry: as for any mode (r.Owner's holder in Limited mode takes
//     the hold, and no second slot).
//  2. Mismatch: if a live holder of the key (of any owner) is in another
//     mode, or in Limited mode with another Limit, Acquire fails with an
//     error matching locker.ErrModeMismatch and changes nothing; so does
//     a request in any other mode while Limited holders hold the key.
//  3. Grant: else, if fewer than n owners hold the key, counting the live
//     Limited waiters queued before r, r becomes a new holder with a new
//     fence, above every earlier grant of the key.
//  4. Refusal: else, as for any mode.
//
// A release wakes every waiter it may have admitted (those within the
// first n - holders of the queue). LockInfo reports a Limited key's
// holders as a Shared one's, with Mode Limited and its Limit.
type Limiter interface {
	KeepsLimits()
}

// LimitConflict is rule 2 of Limiter between a request asking for key in
// mode asked (of Limit askedLimit, if Limited) and a holder in mode held
// (of heldLimit): nil where they may meet (neither is Limited, or both
// are, of one Limit), else what the mismatch is, for the driver to wrap
// with locker.ErrModeMismatch.
func LimitConflict(key string, asked, held Mode, askedLimit, heldLimit int) error {
	switch {
	case asked != Limited && held != Limited, asked == held && askedLimit == heldLimit:
		return nil
	case held != Limited:
		return fmt.Errorf("%q is held as %v, asked for by a Limit(%d)", key, held, askedLimit)
	case asked != Limited:
		return fmt.Errorf("%q is held by a Limit(%d), asked for as %v", key, heldLimit, asked)
	}
	return fmt.Errorf("%q is held by a Limit(%d), asked for by a Limit(%d)", key, heldLimit, askedLimit)
}
