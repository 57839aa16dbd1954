package etcd

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/backoff"
)

// An orphan is an entry's hold whose removal failed: of a cancelled Lock,
// of a re-entry whose write went unconfirmed, of a lease that expired while
// the server was out of reach. Its entry sits on an etcd lease that other
// locks keep alive, so it would block the key for everyone until the Locker
// closes; a background sweep drops it as soon as the server answers.

// Backoff of the background sweep between passes that left orphans.
const (
	sweepFirst = 50 * time.Millisecond
	sweepMax   = 5 * time.Second
)

// orphan records a hold to drop and starts the background sweep if it is
// not running. After Close began, Close's own last pass is the only one.
func (d *etcdDriver) orphan(en *entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.orphans[en] = struct{}{}
	if d.sweeping || d.ctx.Err() != nil {
		return
	}
	d.sweeping = true
	d.sweeper.Go(d.sweepLoop)
}

// sweepLoop retries the orphans with backoff until none is left or the
// driver closes. Finding none left and ending the loop happen under d.mu,
// so an orphan recorded meanwhile either is seen or starts a new loop.
func (d *etcdDriver) sweepLoop() {
	p := backoff.Policy{Min: 2 * sweepFirst, Max: sweepMax}
	// Its caller has just failed: give it a moment.
	if backoff.Sleep(d.ctx, sweepFirst) && backoff.Retry(d.ctx, p, func(ctx context.Context) bool {
		d.sweep(ctx)
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.orphans) == 0 || ctx.Err() != nil {
			d.sweeping = false
			return true
		}
		return false
	}) {
		return
	}
	d.mu.Lock() // closed
	d.sweeping = false
	d.mu.Unlock()
}

// sweep makes one pass over the orphans, stopping at the first failure
// (the server is likely out of reach). A hold found gone is done with.
func (d *etcdDriver) sweep(ctx context.Context) {
	d.mu.Lock()
	todo := slices.Collect(maps.Keys(d.orphans))
	d.mu.Unlock()
	for _, o := range todo {
		err := d.dropHold(ctx, o.key, o.name, o.owner, o.id, 0)
		if err != nil && !errors.Is(err, locker.ErrNotHeld) {
			return
		}
		d.mu.Lock()
		delete(d.orphans, o)
		d.mu.Unlock()
	}
}
