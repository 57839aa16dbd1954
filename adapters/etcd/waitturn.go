package etcd

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// waitTurn waits until en's entry (create revision mine) is the lowest of
// its queue; pred is the entry before it as the creating txn read it.
//
// It hears pred go through a watch live from the server's current
// revision (watchFor): a watch from a past revision takes etcd's
// unsynced-watcher path (delivered every 100 ms) once any write lands in
// between, which is why concurrency.Mutex manages about 81 handoffs/s;
// one read covers the gap instead. After pred goes, a read confirms that
// my entry, and so my etcd lease, are alive (etcd issue 11456) and finds
// any earlier entry left. It keeps the etcd lease alive meanwhile, since
// a wait can outlast it.
func (en *entry) waitTurn(ctx context.Context, mine int64, pred *mvccpb.KeyValue) error {
	readRev := mine
	tick := time.NewTicker(max(en.lease.granted/3, 100*time.Millisecond))
	defer tick.Stop()
	for {
		wch, leave := en.watchFor(ctx, pred)
		next, rev, err := en.watch(ctx, mine, pred, readRev, wch, tick.C)
		leave()
		if err != nil || next == nil {
			return err
		}
		pred, readRev = next, rev
	}
}

// watchFor is a watch that reports pred's deletion: the Locker's watch of
// the queue (queuewatch.go) for an entry that queued near the head, whose
// wait is short, else a watch of pred alone, which has long been served
// in time when pred goes.
func (en *entry) watchFor(ctx context.Context, pred *mvccpb.KeyValue) (clientv3.WatchChan, func()) {
	if en.ahead <= nearHead {
		return en.d.listen(en.d.queue(en.r.Space, en.r.Key))
	}
	wctx, cancel := context.WithCancel(en.d.watchCtx(ctx))
	return en.d.client.Watch(wctx, string(pred.Key), clientv3.WithFilterPut(), clientv3.WithCreatedNotify()), cancel
}

// watch waits on one watch of pred. It returns nil, 0, nil when en holds the
// key, or the new predecessor when the watch must move to it.
func (en *entry) watch(ctx context.Context, mine int64, pred *mvccpb.KeyValue, readRev int64,
	wch clientv3.WatchChan, tick <-chan time.Time) (*mvccpb.KeyValue, int64, error) {
	predGone := func(kv *mvccpb.KeyValue) (bool, bool) { // the watch may be of the whole queue
		gone := bytes.Equal(kv.Key, pred.Key)
		return gone, gone
	}
	for {
		h, err := en.hear(ctx, readRev, wch, tick, predGone)
		if err != nil {
			return nil, 0, err
		}
		next, rev, err := en.check(ctx, mine, h.at)
		switch {
		case err != nil:
			return nil, 0, err
		case next == nil:
			return nil, 0, nil
		case h.broken || !bytes.Equal(next.Key, pred.Key) || next.CreateRevision != pred.CreateRevision:
			return next, rev, nil
		}
		readRev = rev // same predecessor, and this watch covers everything after rev
	}
}

// heard is what a wait learns from its watch: that it must read the
// queue (at a revision this member has applied, if at > 0), and whether
// the watch is over (broken), so that another must be set up.
type heard struct {
	broken bool
	at     int64
}

// hear waits for a response of the wait's watch wch (set up after the
// wait read the queue at readRev) that calls for a read, keeping en's
// etcd lease alive meanwhile. gone tells of each deletion the watch
// reports whether it concerns the wait (relevant), and whether it may have
// let en hold the key (look).
func (en *entry) hear(ctx context.Context, readRev int64, wch clientv3.WatchChan, tick <-chan time.Time,
	gone func(kv *mvccpb.KeyValue) (relevant, look bool)) (heard, error) {
	for {
		select {
		case <-ctx.Done(): // waiting behind holders
			return heard{}, fmt.Errorf("%w: %w", locker.ErrLocked, ctx.Err())
		case <-tick:
			if err := en.lease.ensure(ctx, en.lease.granted*2/3); errors.Is(err, errLeaseGone) {
				return heard{}, errRequeue
			}
			// a failed keep-alive is retried at the next tick
		case resp, ok := <-wch:
			if !ok || resp.Canceled || resp.Err() != nil {
				return heard{broken: true}, nil
			}
			var h heard
			look := resp.Created && resp.Header.Revision > readRev // a change between the read and the watch
			if resp.Created {
				h.at = resp.Header.Revision
			}
			for _, ev := range resp.Events {
				if ev.Type != mvccpb.DELETE || ev.Kv.ModRevision <= readRev {
					continue // the read saw it (a shared watch may pass one on late)
				}
				if relevant, l := gone(ev.Kv); relevant {
					look, h.at = look || l, ev.Kv.ModRevision
				}
			}
			if look {
				return h, nil
			}
		}
	}
}

// check reads, in one revision, my entry and the last entry before it
// (all of them, for a call in a mode others may share): lookBack. It
// returns the entry to wait for next, and the revision read, or nil once
// my entry holds the key.
func (en *entry) check(ctx context.Context, mine, at int64) (*mvccpb.KeyValue, int64, error) {
	before, off, rev, err := en.lookBack(ctx, mine, at)
	if err != nil {
		return nil, 0, err
	}
	if pred := waitFor(before, en.r); pred != nil {
		return pred, rev, nil
	}
	en.granted(off)
	return nil, 0, nil
}

// lookBack reads, in one revision, my entry and the entries before it
// (the last alone, for an Exclusive call), with the fence offset there
// (floor.go). It returns errRequeue if my entry is gone or no longer on my
// etcd lease.
//
// With at > 0 (a watch event's revision, which the member serving the
// watch has applied) it reads there without a quorum round: if my entry
// holds the key there, alive, it holds it from then on, as entries are
// only added after it and its lease is known to live. Should another
// member answer, or the revision be compacted, it reads linearizably.
func (en *entry) lookBack(ctx context.Context, mine, at int64) (before []*mvccpb.KeyValue, off, rev int64, err error) {
	var opts []clientv3.OpOption
	if at > 0 {
		opts = []clientv3.OpOption{clientv3.WithRev(at), clientv3.WithSerializable()}
	}
	last := append(clientv3.WithLastCreate(), clientv3.WithPrefix(), clientv3.WithMaxCreateRev(mine-1), clientv3.WithKeysOnly())
	if en.r.Mode != driver.Exclusive { // all of them, to find the last my mode excludes
		last = []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMaxCreateRev(mine - 1),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)}
	}
	resp, err := en.d.txn(ctx, en.r.Key, nil, []clientv3.Op{
		clientv3.OpGet(en.name, opts...), clientv3.OpGet(en.d.queue(en.r.Space, en.r.Key), append(last, opts...)...),
		en.d.getFloor(en.r.Space, en.r.Key, opts...), // the offset as of the grant (floor.go)
	})
	if err != nil && at > 0 && ctx.Err() == nil {
		return en.lookBack(ctx, mine, 0)
	}
	if err != nil {
		return nil, 0, 0, err
	}
	if me := kvs(resp, 0); len(me) == 0 || me[0].CreateRevision != mine || me[0].Lease != int64(en.lease.id) {
		return nil, 0, 0, errRequeue
	}
	return kvs(resp, 1), floorIn(resp, 2), cmp.Or(at, resp.Header.Revision), nil // the revision the read saw
}
