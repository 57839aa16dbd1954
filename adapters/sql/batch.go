package sql

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/locker-go/locker/driver"
)

var _ driver.Batcher = (*sqlDriver)(nil)

// AcquireBatch takes every key of rs or none in one transaction of the
// modal path, the keys serialized in sorted order (so two batches never
// deadlock), each decided by driver.ModeKeeper's rule as a request that
// does not queue. Only on SQLite, where it saves a commit per key: on a
// server, the Exclusive statements take a free key in one round trip, so
// a transaction of a few statements per key would cost more than the
// Locker's one call per key (ErrSkip). A batch with a Limited request is
// declined too: each goes alone.
func (d *sqlDriver) AcquireBatch(ctx context.Context, rs []*driver.Request) ([]driver.Grant, error) {
	if !d.batches || slices.ContainsFunc(rs, func(r *driver.Request) bool { return r.Space != rs[0].Space || r.Mode == driver.Limited }) {
		return nil, driver.ErrSkip
	}
	t, err := d.spaceDriver(ctx, rs[0].Space)
	if err != nil {
		return nil, err
	}
	if err := t.raiseFor(ctx, rs...); err != nil {
		return nil, err
	}
	order := make([]int, len(rs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(rs[a].Key, rs[b].Key) })
	var (
		gs       []driver.Grant
		mismatch error
	)
	err = t.retry(ctx, func(ctx context.Context) error {
		gs, mismatch = make([]driver.Grant, len(rs)), nil
		return t.batchOnce(ctx, rs, order, gs, &mismatch)
	}, nil)
	if err == nil {
		err = mismatch
	}
	if err != nil {
		return nil, err
	}
	for i := range gs {
		if gs[i].Hold != nil {
			gs[i].Validity = t.valid(rs[i].TTL)
		}
	}
	return gs, nil
}

// batchOnce is one attempt of AcquireBatch: gs is filled with the grants,
// or left without holds (each refused one with its Retry) if any request
// was refused.
func (d *sqlDriver) batchOnce(ctx context.Context, rs []*driver.Request, order []int, gs []driver.Grant, mismatch *error) error {
	tx, err := d.db.BeginTx(ctx, d.txOptions)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	t := txn{d, d.prep.in(tx)}
	states := make([]*modeState, len(rs))
	verdicts := make([]verdict, len(rs))
	refused := false
	for _, i := range order {
		r := rs[i]
		if err := d.lockKey(ctx, t.tx, r.Key); err != nil {
			return err
		}
		if states[i], err = t.read(ctx, r.Key); err != nil {
			return err
		}
		if err := t.gc(ctx, r.Key, states[i]); err != nil {
			return err
		}
		if verdicts[i], *mismatch = states[i].decide(r, ""); *mismatch != nil {
			return nil
		}
		if !verdicts[i].ok {
			gs[i].Retry, refused = msDuration(verdicts[i].retry), true
		}
	}
	if refused {
		return nil // rolled back: nothing taken
	}
	for _, i := range order {
		if gs[i], err = t.grant(ctx, rs[i], states[i], verdicts[i].join); err != nil {
			return err
		}
		callOf(rs[i]).mayHold = true // should the commit's reply be lost
	}
	return tx.Commit()
}

// msDuration is ms milliseconds.
func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// ReleaseBatch declines: the Locker releases the holds one by one.
func (d *sqlDriver) ReleaseBatch(context.Context, []driver.Hold) ([]error, error) {
	return nil, driver.ErrSkip
}
