package etcd

import (
	"context"
	"errors"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker/driver"
)

var _ driver.Batcher = (*etcdDriver)(nil)

// AcquireBatch takes every key of rs or none in one txn where each queue
// is empty: If every queue is empty, Then put every entry, Else read every
// queue; should every request be compatible with every entry read, a
// second txn puts them all, If no entry came meanwhile. It declines
// (ErrSkip) a re-entry, which joins a holder, leases without keep-alive,
// which get an etcd lease each, and Limited requests (a semaphore's slots
// are counted key by key).
func (d *etcdDriver) AcquireBatch(ctx context.Context, rs []*driver.Request) ([]driver.Grant, error) {
	if rs[0].Reentrant || !rs[0].KeepAlive || slices.ContainsFunc(rs, func(r *driver.Request) bool { return r.Mode == driver.Limited }) {
		return nil, driver.ErrSkip
	}
	if err := checkTTL(rs...); err != nil {
		return nil, err
	}
	if err := d.raiseFor(ctx, rs...); err != nil {
		return nil, err
	}
	start := time.Now()
	el, err := d.leaseFor(ctx, rs[0].TTL, true)
	if err != nil {
		return nil, d.fail(ctx, rs[0].Key, err)
	}
	ens := make([]*entry, len(rs))
	var empty []clientv3.Cmp
	var puts, gets []clientv3.Op
	for i, r := range rs {
		q := d.queue(r.Space, r.Key)
		ens[i] = &entry{d: d, r: r, name: d.names.take(q), lease: el}
		r.State = ens[i] // for Abandon
		empty = append(empty, clientv3.Compare(clientv3.CreateRevision(q), "=", 0).WithPrefix())
		puts = append(puts, clientv3.OpPut(ens[i].name, ens[i].record().encode(), clientv3.WithLease(el.id)))
		gets = append(gets, clientv3.OpGet(q, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)))
	}
	for _, r := range rs { // the offsets: responses len(rs)...
		puts = append(puts, d.getFloor(r.Space, r.Key))
	}
	resp, err := batchTxn(ctx, ens, empty, puts, gets...)
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		since, ok, err := d.admitted(rs, resp)
		switch {
		case err != nil:
			return nil, err // a mismatch: nothing written
		case !ok:
			return make([]driver.Grant, len(rs)), nil // refused: the Locker waits key by key
		}
		for _, en := range ens {
			since = append(since, en.unused())
		}
		if resp, err = batchTxn(ctx, ens, since, puts); err != nil {
			return nil, err
		}
		if !resp.Succeeded {
			return make([]driver.Grant, len(rs)), nil // an entry came meanwhile: refused
		}
	}
	gs := make([]driver.Grant, len(rs))
	for i, en := range ens {
		en.granted(floorIn(resp, len(rs)+i))
		if gs[i], err = en.take(ctx, resp.Header.Revision, resp.Header.Revision, start); err != nil {
			return nil, err
		}
	}
	return gs, nil
}

// admitted reports whether every request of rs is compatible with every
// entry of its queue, as resp (a batch's first txn, which put none) read
// them; if so, since is the condition of the second txn: no entry came
// since. A mismatch (rule 2) is an error.
func (d *etcdDriver) admitted(rs []*driver.Request, resp *clientv3.TxnResponse) (since []clientv3.Cmp, ok bool, err error) {
	for i, r := range rs {
		q := kvs(resp, i)
		if len(q) > 0 {
			if err := mismatch(r, q[0]); err != nil {
				return nil, false, err
			}
		}
		if lastIncompatible(q, r.Mode) != nil {
			return nil, false, nil
		}
		since = append(since, clientv3.Compare(clientv3.CreateRevision(d.queue(r.Space, r.Key)), "<", resp.Header.Revision+1).WithPrefix())
	}
	return since, true, nil
}

// ReleaseBatch drops every hold of hs in one txn, where each is its
// entry's only hold (else, or should an entry have changed, it declines:
// the Locker releases them one by one).
func (d *etcdDriver) ReleaseBatch(ctx context.Context, hs []driver.Hold) ([]error, error) {
	var cmps []clientv3.Cmp
	var dels []clientv3.Op
	for _, dh := range hs {
		h, ok := dh.(*hold)
		if !ok || h.lease.dedicated || h.unsure {
			return nil, driver.ErrSkip
		}
		mine := recordOf(h.r, 0).encode()
		cmps = append(cmps, clientv3.Compare(clientv3.Value(h.name), "=", mine),
			clientv3.Compare(clientv3.CreateRevision(h.name), "=", h.created))
		dels = append(dels, clientv3.OpDelete(h.name))
	}
	resp, err := d.txn(ctx, hs[0].(*hold).r.Key, cmps, dels)
	switch {
	case err != nil:
		return nil, err
	case !resp.Succeeded:
		return nil, driver.ErrSkip
	}
	for _, dh := range hs {
		d.names.give(dh.(*hold).name)
	}
	return make([]error, len(hs)), nil
}

// batchTxn runs a batch's txn (as its first entry's); one that got no
// answer may land still, with every entry of the batch.
func batchTxn(ctx context.Context, ens []*entry, cmp []clientv3.Cmp, then []clientv3.Op, els ...clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := ens[0].txn(ctx, cmp, then, els...)
	if err != nil && !errors.Is(err, errRequeue) {
		for _, en := range ens {
			en.mayLand = true
		}
	}
	return resp, err
}
