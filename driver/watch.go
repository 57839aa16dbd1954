package driver

import (
	"context"
	"strings"
)

// Election names (locker.Campaign) reach a driver as keys of the Subtree
// space that end in '/', which no subtree path may (a path has no empty
// segment): a driver that keeps spaces apart keeps elections apart with
// no space of its own. Election is the space that LockInfo reports them
// in, back in the portable layer; a driver never sees it in a Request.
const Election Space = 2

// Leaf reports whether no lock can lie below key in space: a plain key,
// or a Subtree key that ends in '/' (an election's), below which no path
// can be. A driver that gives a subtree node granted after a wait a fresh
// fence, because a lock below it may have drawn one meanwhile, need not
// for a leaf: its fence, drawn as it queued, is above every earlier
// grant of the key already.
func Leaf(space Space, key string) bool {
	return space != Subtree || strings.HasSuffix(key, "/")
}

// Watcher is implemented by drivers that can tell an observer
// (locker.Observe) that a key's holders may have changed, so that it reads
// them again. Without it, an observer reads them at the holder's expiry
// and on a timer.
type Watcher interface {
	// Watch starts signals for key in space and returns once they are
	// live: each grant, release or end of a holder that the backend
	// reports after Watch returns, and each Announce of the key, sends on
	// changed (which buffers one signal, so several may arrive as one).
	// stop ends them. ctx bounds the setting up. ErrSkip declines for
	// good (the backend has no notification to offer: MySQL, say): the
	// observer then reads on a timer.
	Watch(ctx context.Context, space Space, key string) (changed <-chan struct{}, stop func(), err error)
}

// Announcer is implemented by Watchers whose backend does not signal
// grants and releases by itself (a Redis channel that nothing else
// publishes on): the Locker calls Announce after each grant and release
// of an election's lease, so that watchers hear of a new leader and of
// one that resigned. A holder that ends unreleased (its process killed)
// is heard at its expiry, which Status reports.
type Announcer interface {
	Announce(ctx context.Context, space Space, key string) error
}
