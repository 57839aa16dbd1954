package etcd

import (
	"context"
	"errors"
	"time"

	"github.com/locker-go/locker"
)

// An orphan is a hold whose removal failed: of a cancelled Lock, of a
// re-entry whose write went unconfirmed, of a lease that expired while the
// server was out of reach. Its entry sits on an etcd lease that other locks
// keep alive, so it would block the key for everyone until the Locker
// closes; a background sweep drops it as soon as the server answers.
type orphan struct {
	key, name, owner, hold string
}

// Backoff of the background sweep between passes that left orphans.
const (
	sweepFirst = 50 * time.Millisecond
	sweepMax   = 5 * time.Second
)

// orphan records a hold to drop and starts the background sweep if it is
// not running. After Close began, Close's own last pass is the only one.
func (l *Locker) orphan(key, name, owner, hold string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.orphans[orphan{key, name, owner, hold}] = struct{}{}
	if l.sweeping || l.closing {
		return
	}
	l.sweeping = true
	l.sweeper.Go(l.sweepLoop)
}

// sweepLoop retries the orphans with backoff until none is left or the
// Locker closes.
func (l *Locker) sweepLoop() {
	ctx, stop := l.set.Context(context.Background())
	defer stop()
	wait := sweepFirst
	t := time.NewTimer(wait) // its caller has just failed: give it a moment
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
		case <-t.C:
			l.sweep(ctx)
		}
		l.mu.Lock()
		if len(l.orphans) == 0 || ctx.Err() != nil {
			l.sweeping = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		wait = min(2*wait, sweepMax)
		t.Reset(wait)
	}
}

// sweep makes one pass over the orphans, stopping at the first failure
// (the server is likely out of reach). A hold found gone is done with.
func (l *Locker) sweep(ctx context.Context) {
	l.mu.Lock()
	todo := make([]orphan, 0, len(l.orphans))
	for o := range l.orphans {
		todo = append(todo, o)
	}
	l.mu.Unlock()
	for _, o := range todo {
		err := l.dropHold(ctx, o.key, o.name, o.owner, o.hold, 0)
		if err != nil && !errors.Is(err, locker.ErrNotHeld) {
			return
		}
		l.mu.Lock()
		delete(l.orphans, o)
		l.mu.Unlock()
	}
}
