package etcd

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// waitTurn waits until en's entry (create revision mine) is the lowest of
// its queue that its mode excludes; before are the entries before it as
// the creating txn read them (the last nearHead of an Exclusive call's).
//
// A waiter that queued near the head hears the queue through its
// Locker's watch of it (queuewatch.go) and counts off the entries before
// it that its mode excludes as they go. Once the last has gone it holds
// the key without a read (the read would take as long as the hand-off's
// write did), if the watch showed every change since the creating txn
// (or the read it counted from): no entry rewritten (a raised fence
// floor rewrites one, floor.go), its own entry not gone (its etcd lease
// ended: etcd issue 11456), nothing missed before the watch began. Otherwise, and for a waiter further
// back, which watches its predecessor pred alone, a read at the
// revision it heard of confirms that its entry is alive and finds any
// earlier entry left; near the head, it counts off from there (a
// Locker's first wait on a key reads once, as its watch begins after the
// waiter queued, and its hand-off takes none).
//
// A watch from a past revision takes etcd's unsynced-watcher path
// (delivered every 100 ms) once any write lands in between, which is why
// concurrency.Mutex manages about 81 handoffs/s: watches here are live
// from the server's current revision, and a read covers the gap. It keeps
// the etcd lease alive meanwhile, since a wait can outlast it.
func (en *entry) waitTurn(ctx context.Context, mine int64, before []*mvccpb.KeyValue) error {
	readRev, pred := mine, waitFor(before, en.r)
	tick := time.NewTicker(max(en.lease.granted/3, 100*time.Millisecond))
	defer tick.Stop()
	for {
		wch, leave := en.watchFor(ctx, pred)
		next, rev, err := en.watch(ctx, mine, pred, before, readRev, wch, tick.C)
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
	if en.nearHead() {
		return en.d.listen(en.d.queue(en.r.Space, en.r.Key))
	}
	wctx, cancel := context.WithCancel(en.d.watchCtx(ctx))
	return en.d.client.Watch(wctx, string(pred.Key), clientv3.WithFilterPut(), clientv3.WithCreatedNotify()), cancel
}

// nearHead reports whether en queued with at most nearHead entries before
// it: it waits on its Locker's (its client's) watch of the queue, and its creating txn
// read every entry before it.
func (en *entry) nearHead() bool { return en.ahead <= nearHead }

// watch waits on one watch of pred. It returns nil, 0, nil when en holds the
// key, or the new predecessor when the watch must move to it. A waiter
// near the head counts off the entries of before (those its creating txn
// read, if readRev is mine), or those a read found, all of them, instead.
func (en *entry) watch(ctx context.Context, mine int64, pred *mvccpb.KeyValue, before []*mvccpb.KeyValue, readRev int64,
	wch clientv3.WatchChan, tick <-chan time.Time) (*mvccpb.KeyValue, int64, error) {
	predGone := func(kv *mvccpb.KeyValue) (bool, bool) { // the watch may be of the whole queue
		gone := bytes.Equal(kv.Key, pred.Key)
		return gone, gone
	}
	gone, c := predGone, (*countOff)(nil)
	if readRev == mine && en.nearHead() {
		c = en.countOff(before, en.excludes, noneLeft)
		gone = c.gone
	}
	for {
		h, err := en.hear(ctx, readRev, wch, tick, gone)
		if err != nil {
			return nil, 0, err
		}
		if c.holds(h) {
			return nil, 0, nil // with the fence offset of the read it counted from
		}
		l, err := en.lookBack(ctx, mine, h.at)
		if err != nil {
			return nil, 0, err
		}
		switch next := waitFor(l.before, en.r); {
		case next == nil:
			en.granted(l.off)
			return nil, 0, nil
		case h.broken || !bytes.Equal(next.Key, pred.Key) || next.CreateRevision != pred.CreateRevision:
			return next, l.rev, nil
		}
		readRev = l.rev // same predecessor, and this watch covers everything after rev
		gone, c = predGone, nil
		if en.nearHead() && l.all { // count off from this read, with its offset
			c = en.countOff(l.before, en.excludes, noneLeft)
			gone, en.offset = c.gone, l.off
		}
	}
}

// noneLeft: a waiter whose mode is not Limited holds the key once no
// entry it excludes is left before it.
func noneLeft(left []*mvccpb.KeyValue) bool { return len(left) == 0 }

// excludes reports whether en's mode excludes entry kv before it (not
// for a Limited call: see countDown).
func (en *entry) excludes(kv *mvccpb.KeyValue) bool { return !en.r.Mode.Compatible(modeOf(kv)) }

// countOff is a waiter's count of the entries before its own that keep it
// from the key, as its watch of the queue reports them gone.
type countOff struct {
	name string                        // the waiter's own entry
	left []*mvccpb.KeyValue            // not gone yet
	done func([]*mvccpb.KeyValue) bool // whether left admits the waiter
	own  bool                          // the waiter's own entry went
}

// countOff counts off those of before that keep en out (blocks), until
// those left admit it (done).
func (en *entry) countOff(before []*mvccpb.KeyValue, blocks func(*mvccpb.KeyValue) bool, done func([]*mvccpb.KeyValue) bool) *countOff {
	left := slices.DeleteFunc(slices.Clone(before), func(kv *mvccpb.KeyValue) bool { return !blocks(kv) })
	return &countOff{name: en.name, left: left, done: done}
}

// gone is hear's test of a deletion: relevant if it is one of left or
// the waiter's own entry, and calling for a look if that admits the
// waiter, or its own entry went.
func (c *countOff) gone(kv *mvccpb.KeyValue) (relevant, look bool) {
	if string(kv.Key) == c.name {
		c.own = true
		return true, true
	}
	was := len(c.left)
	c.left = slices.DeleteFunc(c.left, func(e *mvccpb.KeyValue) bool { return bytes.Equal(e.Key, kv.Key) })
	return len(c.left) < was, len(c.left) < was && c.done(c.left)
}

// holds reports whether the waiter holds the key once hear returned h:
// the entries that kept it out are gone, its own is not, and the watch
// showed every change since the read that found them.
func (c *countOff) holds(h heard) bool {
	return c != nil && !c.own && !h.broken && !h.unsure && c.done(c.left)
}

// heard is what a wait learns from its watch: that it must read the
// queue (at a revision this member has applied, if at > 0), and whether
// the watch is over (broken), so that another must be set up. unsure: the
// watch may not have shown every change since the wait's read (it began
// later), or showed an entry rewritten, so that only a read tells.
type heard struct {
	broken, unsure bool
	at             int64
}

// hear waits for a response of the wait's watch wch (set up after the
// wait read the queue at readRev) that calls for a read, keeping en's
// etcd lease alive meanwhile. gone tells of each deletion the watch
// reports whether it concerns the wait (relevant), and whether it may have
// let en hold the key (look).
func (en *entry) hear(ctx context.Context, readRev int64, wch clientv3.WatchChan, tick <-chan time.Time,
	gone func(kv *mvccpb.KeyValue) (relevant, look bool)) (heard, error) {
	var h heard
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
				return heard{broken: true, unsure: true}, nil
			}
			look := resp.Created && resp.Header.Revision > readRev // a change between the read and the watch
			if resp.Created {
				h.at, h.unsure = resp.Header.Revision, h.unsure || look
			}
			for _, ev := range resp.Events {
				switch {
				case ev.Kv.ModRevision <= readRev:
					continue // the read saw it (a shared watch may pass one on late)
				case ev.Type != mvccpb.DELETE:
					h.unsure = h.unsure || ev.Kv.Version > 1 // a rewrite, not a new entry
					continue
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

// readBefore is how en reads the entries of its queue before its own:
// all of them, to find the last one its mode is not compatible with (or,
// Limited, to count them); for an Exclusive call, which each excludes,
// the last nearHead, newest first (byCreation), which are all of them for
// a waiter that counts them off.
func (en *entry) readBefore() []clientv3.OpOption {
	if en.r.Mode == driver.Exclusive {
		return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend),
			clientv3.WithLimit(nearHead)}
	}
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)}
}

// looked is what lookBack read: the entries before the caller's (all of
// them, unless all is false: the last nearHead of an Exclusive call's),
// the key's fence offset, and the revision read.
type looked struct {
	before   []*mvccpb.KeyValue
	all      bool
	off, rev int64
}

// lookBack reads, in one revision, my entry and the entries before it
// (the last nearHead, for an Exclusive call), with the fence offset there
// (floor.go). It returns errRequeue if my entry is gone or no longer on my
// etcd lease.
//
// With at > 0 (a watch event's revision, which the member serving the
// watch has applied) it reads there without a quorum round: if my entry
// holds the key there, alive, it holds it from then on, as entries are
// only added after it and its lease is known to live. Should another
// member answer, or the revision be compacted, it reads linearizably.
func (en *entry) lookBack(ctx context.Context, mine, at int64) (looked, error) {
	var opts []clientv3.OpOption
	if at > 0 {
		opts = []clientv3.OpOption{clientv3.WithRev(at), clientv3.WithSerializable()}
	}
	before := append(en.readBefore(), clientv3.WithMaxCreateRev(mine-1))
	if en.r.Mode == driver.Exclusive {
		before = append(before, clientv3.WithKeysOnly()) // each excludes it, whatever its mode
	}
	resp, err := en.d.txn(ctx, en.r.Key, nil, []clientv3.Op{
		clientv3.OpGet(en.name, opts...), clientv3.OpGet(en.d.queue(en.r.Space, en.r.Key), append(before, opts...)...),
		en.d.getFloor(en.r.Space, en.r.Key, opts...), // the offset as of the grant (floor.go)
	})
	if err != nil && at > 0 && ctx.Err() == nil {
		return en.lookBack(ctx, mine, 0)
	}
	if err != nil {
		return looked{}, err
	}
	if me := kvs(resp, 0); len(me) == 0 || me[0].CreateRevision != mine || me[0].Lease != int64(en.lease.id) {
		return looked{}, errRequeue
	}
	read := resp.Responses[1].GetResponseRange() // its Count would take in entries after mine: More tells
	return looked{before: byCreation(read.Kvs), all: !read.More, off: floorIn(resp, 2),
		rev: cmp.Or(at, resp.Header.Revision)}, nil // the revision the read saw
}
