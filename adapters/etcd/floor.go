package etcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker/driver"
)

var _ driver.FenceFloorer = (*etcdDriver)(nil)

// Fence floors. A fence is a revision (the entry's create revision, or a
// write's for a subtree node granted after a wait), and revisions cannot
// be raised; so a key whose fences were raised keeps an offset beside its
// queue, "<space prefix>%F<escaped key>" (no escaped key holds "%F", as
// escape writes '%' as "%25"), that only grows, and a fence is its
// revision plus the offset read when it was granted: in the txn that
// granted it, or in the read that found it granted after a wait.
// Revisions and offsets only grow, and a key's grants are read in their
// order, so its fences rise; an offset raised to a floor puts every later
// fence above it. A grant with an offset records it in its entry, so that
// a re-entry and Status show its fence: a write more, for a key that was
// ever raised (a migration's), none for the others.

// floorKey is key's offset.
func (d *etcdDriver) floorKey(space driver.Space, key string) string {
	return d.spacePrefix(space) + "%F" + escape(key)
}

// getFloor reads key's offset, in a txn that grants.
func (d *etcdDriver) getFloor(space driver.Space, key string, opts ...clientv3.OpOption) clientv3.Op {
	return clientv3.OpGet(d.floorKey(space, key), opts...)
}

// floorIn is the offset that response i of resp (a getFloor) read.
func floorIn(resp *clientv3.TxnResponse, i int) int64 {
	var off int64
	if kv := kvs(resp, i); len(kv) > 0 {
		off, _ = strconv.ParseInt(string(kv[0].Value), 10, 64)
	}
	return off
}

// errFloorRange: a floor too close to the fence's range for revisions to
// be added to it.
var errFloorRange = fmt.Errorf("locker/etcd: fence floor above %d: %w", int64(math.MaxInt64/2), errors.ErrUnsupported)

// RaiseFence raises the prefix's offset to floor, so that every later
// fence (a revision, at least 1, plus the offset) is above it.
//
// A waiter that counts off its queue through a watch takes the offset its
// creating txn read, unless the watch shows an entry rewritten before its
// turn (waitturn.go); so the txn that raises the offset also rewrites the
// queue's last entry as it is, or finds the queue empty (nobody waits).
func (d *etcdDriver) RaiseFence(ctx context.Context, space driver.Space, key string, floor uint64) error {
	if floor == 0 {
		return nil
	}
	if floor > math.MaxInt64/2 { // room for the revisions added to it
		return errFloorRange
	}
	want, fk, q := int64(floor), d.floorKey(space, key), d.queue(space, key)
	for {
		resp, err := d.txn(ctx, key, nil, []clientv3.Op{d.getFloor(space, key), clientv3.OpGet(q, clientv3.WithLastCreate()...)})
		if err != nil {
			return err
		}
		var rev int64
		if kv := kvs(resp, 0); len(kv) > 0 {
			rev = kv[0].ModRevision
		}
		if cur := floorIn(resp, 0); cur >= want {
			d.offsets.saw(fk, cur)
			return nil
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(fk), "=", rev),
			clientv3.Compare(clientv3.CreateRevision(q), "=", 0).WithPrefix()}
		ops := []clientv3.Op{clientv3.OpPut(fk, strconv.FormatInt(want, 10))}
		if last := kvs(resp, 1); len(last) > 0 {
			name := string(last[0].Key)
			cmps[1] = clientv3.Compare(clientv3.ModRevision(name), "=", last[0].ModRevision)
			ops = append(ops, clientv3.OpPut(name, string(last[0].Value), clientv3.WithIgnoreLease()))
		}
		set, err := d.txn(ctx, key, cmps, ops)
		if err != nil || set.Succeeded {
			if err == nil {
				d.offsets.saw(fk, want)
			}
			return err
		}
	}
}

// record is the record of a new entry of en's call, with the offset this
// driver last saw on its key (a grant with another rewrites it: settle).
func (en *entry) record() record {
	en.recorded = en.d.offsets.get(en.d.floorKey(en.r.Space, en.r.Key))
	return recordOf(en.r, en.recorded)
}

// granted notes the offset read as en was granted.
func (en *entry) granted(off int64) {
	en.offset = off
	en.d.offsets.saw(en.d.floorKey(en.r.Space, en.r.Key), off)
}

// offsetCache is the offsets last seen per key, so that a raised key's
// new entries are written with theirs: bounded, as keys are many and an
// offset missing here only costs a rewrite.
type offsetCache struct {
	mu sync.Mutex
	m  map[string]int64
}

const offsetCacheMax = 4096

func (c *offsetCache) get(k string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *offsetCache) saw(k string, off int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case off == 0 && c.m[k] == 0:
		return // the common case: a key never raised
	case c.m == nil || len(c.m) >= offsetCacheMax:
		c.m = map[string]int64{}
	}
	c.m[k] = off
}

// fenceOf is the fence of entry kv with record rec.
func fenceOf(createRev int64, rec record) int64 {
	if rec.Fence != 0 {
		return rec.Fence + rec.Offset
	}
	return createRev + rec.Offset
}

// settle records the offset of en's grant in its entry, if it is not the
// one its record has: a re-entry and Status then find the fence. A fresh
// entry (created at rev created, unchanged since) is rewritten at once.
func (en *entry) settle(ctx context.Context, created int64) error {
	if en.offset == en.recorded {
		return nil
	}
	rec := recordOf(en.r, en.offset)
	if ok, err := en.d.rewrite(ctx, en.r.Key, en.name, created, rec); ok || err != nil {
		en.recorded = en.offset
		return err
	}
	for en.offset != en.recorded { // changed since (a re-entry): read it
		resp, err := en.d.txn(ctx, en.r.Key, nil, []clientv3.Op{clientv3.OpGet(en.name)})
		if err != nil {
			return err
		}
		kv := kvs(resp, 0)
		if len(kv) == 0 {
			return errRequeue
		}
		rec, err := decodeRecord(kv[0].Value)
		if err != nil {
			return errRequeue
		}
		rec.Offset = en.offset
		if ok, err := en.d.rewrite(ctx, en.r.Key, en.name, kv[0].ModRevision, rec); err != nil {
			return err
		} else if ok {
			en.recorded = en.offset
		}
	}
	return nil
}

// raiseFor raises the offset of each of rs to its Floor, before their
// attempt (a Migration's requests; others ask none).
func (d *etcdDriver) raiseFor(ctx context.Context, rs ...*driver.Request) error {
	for _, r := range rs {
		if err := d.RaiseFence(ctx, r.Space, r.Key, r.Floor); err != nil {
			return err
		}
	}
	return nil
}
