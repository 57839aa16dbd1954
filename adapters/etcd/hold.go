package etcd

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/backoff"
)

// hold is one granted hold (driver.Hold, driver.Expirer): its entry, with
// its create revision as the proof of ownership. The portable lease
// makes its calls one at a time.
type hold struct {
	*entry
	created int64 // the entry's create revision: which entry is ours
	// unsure: a Release failed after its write may have applied, so a hold
	// found gone on the next try is taken as released by that write.
	unsure bool
}

var _ driver.Expirer = (*hold)(nil)

// Refresh keeps the etcd lease alive (one keep-alive serves the locks on
// it) and checks that the entry is still ours: that is how a holder learns
// of a ForceUnlock, which deletes the entry, not the shared lease. A
// Locker's keep-alive renews its holds in batches instead (renew.go).
func (h *hold) Refresh(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if err := h.lease.ensure(ctx, h.r.TTL); err != nil {
		return 0, h.leaseErr(ctx, err)
	}
	resp, err := h.d.txn(ctx, h.r.Key, nil, []clientv3.Op{clientv3.OpGet(h.name)})
	if err != nil {
		return 0, err
	}
	if !h.ours(kvs(resp, 0)) {
		return 0, locker.ErrNotHeld
	}
	return h.valid(start), nil
}

// leaseErr is what a refresh answers when keeping its etcd lease alive
// failed with err: ErrNotHeld if the server dropped the lease.
func (h *hold) leaseErr(ctx context.Context, err error) error {
	if errors.Is(err, errLeaseGone) {
		return locker.ErrNotHeld
	}
	return h.d.fail(ctx, h.r.Key, err)
}

// ours reports whether kv, a read of the hold's entry, shows it still
// ours: the same entry (create revision), on its etcd lease, with the
// hold in its record.
func (h *hold) ours(kv []*mvccpb.KeyValue) bool {
	if len(kv) == 0 || kv[0].CreateRevision != h.created || kv[0].Lease != int64(h.lease.id) {
		return false
	}
	rec, err := decodeRecord(kv[0].Value)
	return err == nil && rec.has(h.r.ID)
}

// valid is how long the hold is known valid from start, once refreshed:
// its TTL, or less if its etcd lease is known to live less.
func (h *hold) valid(start time.Time) time.Duration {
	return min(h.r.TTL, h.lease.expires().Sub(start))
}

// Release drops this hold; the entry goes with its last hold. It can be
// repeated after a failure (a retried Unlock): the drop applies once, and
// a hold found gone after a failed try counts as released.
func (h *hold) Release(ctx context.Context) error {
	err := h.d.dropHold(ctx, h.r.Key, h.name, recordOf(h.r, h.recorded), h.r.ID, h.created)
	switch {
	case errors.Is(err, locker.ErrNotHeld) && h.unsure:
		err = nil // the earlier try's write did apply
	case err != nil && !errors.Is(err, locker.ErrNotHeld):
		h.unsure = true
		return err
	}
	if err == nil && h.lease.dedicated {
		h.lease.revoke(ctx)
	}
	return err
}

// Expire frees the key as soon as the lease ends unrenewed, rather than
// when etcd's lease (whole seconds, at least its minimum TTL) runs out; a
// hold it cannot drop is left to the sweep.
func (h *hold) Expire(ctx context.Context) {
	err := h.Release(ctx)
	if err != nil && !errors.Is(err, locker.ErrNotHeld) {
		h.d.orphan(h.entry)
	}
	if err != nil && h.lease.dedicated {
		h.lease.revoke(ctx)
	}
}

// addHold adds hold to the entry name of owner, whose value was read at
// mod revision rev as rec. It is idempotent: a hold already there is not
// added again. It returns errRequeue if the entry changed since the read.
func (d *etcdDriver) addHold(ctx context.Context, key, name string, rev int64, rec record, hold string) error {
	if rec.has(hold) {
		return nil
	}
	rec.Holds = append(slices.Clip(rec.Holds), hold) // the caller's rec stays as it was
	ok, err := d.rewrite(ctx, key, name, rev, rec)
	if err == nil && !ok {
		return errRequeue
	}
	return err
}

// dropHold removes hold from the entry name of who (its record as its
// call wrote it, but for the holds; with create revision fence, if fence >
// 0), deleting the entry with its last hold; ErrNotHeld, changing nothing,
// if the hold or the entry is gone. A single hold takes one txn: delete if
// the value is exactly who with that one hold, else read it, and rewrite.
func (d *etcdDriver) dropHold(ctx context.Context, key, name string, who record, hold string, fence int64) error {
	owner := who.Owner
	exact := who
	exact.Holds = []string{hold}
	cmp := []clientv3.Cmp{clientv3.Compare(clientv3.Value(name), "=", exact.encode())}
	if fence > 0 {
		cmp = append(cmp, clientv3.Compare(clientv3.CreateRevision(name), "=", fence))
	}
	for {
		resp, err := d.txn(ctx, key, cmp, []clientv3.Op{clientv3.OpDelete(name)}, clientv3.OpGet(name))
		if err != nil {
			return err
		}
		if resp.Succeeded {
			d.names.give(name)
			return nil
		}
		kv := kvs(resp, 0)
		if len(kv) == 0 || (fence > 0 && kv[0].CreateRevision != fence) {
			return locker.ErrNotHeld
		}
		rec, err := decodeRecord(kv[0].Value)
		if err != nil || rec.Owner != owner || !rec.has(hold) {
			return locker.ErrNotHeld
		}
		rec.Holds = slices.DeleteFunc(rec.Holds, func(h string) bool { return h == hold })
		if ok, err := d.rewrite(ctx, key, name, kv[0].ModRevision, rec); ok || err != nil {
			return err
		}
	}
}

// rewrite sets the record of the entry name to rec, deleting the entry if
// rec has no hold, if the entry's mod revision is still rev; it reports
// whether it did.
func (d *etcdDriver) rewrite(ctx context.Context, key, name string, rev int64, rec record) (bool, error) {
	op := clientv3.OpDelete(name)
	if len(rec.Holds) > 0 {
		op = clientv3.OpPut(name, rec.encode(), clientv3.WithIgnoreLease())
	}
	resp, err := d.txn(ctx, key, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(name), "=", rev)}, []clientv3.Op{op})
	ok := err == nil && resp.Succeeded
	if ok && len(rec.Holds) == 0 {
		d.names.give(name)
	}
	return ok, err
}

// An orphan is a hold whose removal failed (a cancelled Lock, an expired
// lease, with the server out of reach). Its entry may sit on an etcd lease
// that other locks keep alive, blocking the key until the Locker closes,
// so a background sweep drops it as soon as the server answers.

// Backoff of the sweep between passes that left orphans.
const (
	sweepFirst = 50 * time.Millisecond
	sweepMax   = 5 * time.Second
)

// strayWindow is how long the sweep looks for an entry whose creating txn
// got no answer and that Abandon found missing: etcd may still apply a
// txn its client gave up on (a proposal that a leader change or a slow
// apply held back), and the entry would then sit on the Locker's kept-alive
// lease ahead of every later waiter. Such a txn lands within a few
// election timeouts (1 s by default).
const strayWindow = 30 * time.Second

// orphan records a hold to drop and wakes the background sweep, started
// on the first orphan. The portable Locker makes no call once Close began.
func (d *etcdDriver) orphan(en *entry) {
	d.Info("locker/etcd: an entry could not be removed; the sweep retries in the background", "key", en.r.Key)
	d.mu.Lock()
	d.orphans[en] = struct{}{}
	d.mu.Unlock()
	d.started.Do(func() { d.sweeper.Go(d.sweepLoop) })
	select {
	case d.kick <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// sweepLoop retries the orphans with backoff until none is left, each time
// one is added, until the driver closes.
func (d *etcdDriver) sweepLoop() {
	p := backoff.Policy{Min: 2 * sweepFirst, Max: sweepMax}
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-d.kick:
		}
		// Its caller has just failed: give it a moment.
		if backoff.Sleep(d.ctx, sweepFirst) {
			backoff.Retry(d.ctx, p, d.sweep)
		}
	}
}

// sweep makes one pass over the orphans, stopping at the first failure
// (the server is likely out of reach). A hold found gone is done with,
// but for one that may still land (strayUntil). It reports whether none
// is left.
func (d *etcdDriver) sweep(ctx context.Context) bool {
	d.mu.Lock()
	todo := slices.Collect(maps.Keys(d.orphans))
	d.mu.Unlock()
	left := false
	for _, o := range todo {
		err := o.drop(ctx)
		switch {
		case err != nil && !errors.Is(err, locker.ErrNotHeld):
			return false
		case err != nil && time.Now().Before(o.strayUntil):
			left = true // not there (yet): look again
			continue
		}
		d.mu.Lock()
		delete(d.orphans, o)
		d.mu.Unlock()
	}
	return !left
}
