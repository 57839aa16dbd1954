package etcd

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

var _ driver.BatchRefresher = (*etcdDriver)(nil)

// maxTxnOps is how many entry reads one txn of RefreshBatch carries:
// etcd's default --max-txn-ops. A server set lower refuses the txn; its
// holds are then declined, to be refreshed alone.
const maxTxnOps = 128

// renewal is one hold of a RefreshBatch and the index of its answer.
type renewal struct {
	i int
	h *hold
}

// RefreshBatch does each hold's Refresh in few calls: one keep-alive per
// etcd lease (a Locker's kept-alive holds share one per TTL), then the
// entries read, maxTxnOps to a txn, and each answered as Refresh would.
// A hold of another driver is declined (driver.ErrSkip).
func (d *etcdDriver) RefreshBatch(ctx context.Context, hs []driver.Hold) ([]driver.Refreshed, error) {
	start := time.Now()
	out := make([]driver.Refreshed, len(hs))
	var todo []renewal
	for i, dh := range hs {
		if h, ok := dh.(*hold); ok && h.d == d {
			todo = append(todo, renewal{i: i, h: h})
		} else {
			out[i].Err = driver.ErrSkip
		}
	}
	todo = d.keepLeases(ctx, todo, out)
	var wg sync.WaitGroup
	for chunk := range slices.Chunk(todo, maxTxnOps) {
		wg.Go(func() { d.checkEntries(ctx, start, chunk, out) })
	}
	wg.Wait()
	return out, nil
}

// keepLeases keeps the etcd leases of todo alive, one call per lease at
// most (see keepLease), and returns the holds whose lease lives; the
// others' answers are set in out.
func (d *etcdDriver) keepLeases(ctx context.Context, todo []renewal, out []driver.Refreshed) []renewal {
	byID := map[clientv3.LeaseID][]renewal{}
	for _, r := range todo {
		byID[r.h.lease.id] = append(byID[r.h.lease.id], r)
	}
	var wg sync.WaitGroup
	for _, group := range byID {
		wg.Go(func() { keepLease(ctx, group, out) })
	}
	wg.Wait()
	return slices.DeleteFunc(todo, func(r renewal) bool { return out[r.i].Err != nil })
}

// keepLease keeps one etcd lease alive for group, its holds, as their
// Refresh would (each makes it known to live its TTL on), with one ensure:
// of the value known to live longest, for the longest TTL. A hold whose
// value is another (a re-entry's own) takes on what that one learned.
func keepLease(ctx context.Context, group []renewal, out []driver.Refreshed) {
	el := group[0].h.lease
	var need time.Duration
	for _, r := range group {
		need = max(need, r.h.r.TTL)
		if r.h.lease.expires().After(el.expires()) {
			el = r.h.lease
		}
	}
	err := el.ensure(ctx, need)
	for _, r := range group {
		if err == nil {
			out[r.i].Err = r.h.leaseErr(ctx, r.h.lease.adopt(ctx, el))
		} else {
			out[r.i].Err = r.h.leaseErr(ctx, err)
		}
	}
}

// checkEntries reads the entries of chunk, at most maxTxnOps holds, in one
// txn, and answers each as Refresh: ErrNotHeld unless its entry is still
// its own, else its validity from start.
func (d *etcdDriver) checkEntries(ctx context.Context, start time.Time, chunk []renewal, out []driver.Refreshed) {
	ops := make([]clientv3.Op, len(chunk))
	for j, r := range chunk {
		ops[j] = clientv3.OpGet(r.h.name)
	}
	rctx, cancel := d.rpc(ctx)
	defer cancel()
	resp, err := d.client.Txn(rctx).Then(ops...).Commit()
	for j, r := range chunk {
		switch {
		case errors.Is(err, rpctypes.ErrTooManyOps):
			out[r.i].Err = driver.ErrSkip // the server's --max-txn-ops is lower
		case err != nil:
			out[r.i].Err = d.fail(ctx, r.h.r.Key, err)
		case !r.h.ours(kvs(resp, j)):
			out[r.i].Err = locker.ErrNotHeld
		default:
			out[r.i].Valid = r.h.valid(start)
		}
	}
}
