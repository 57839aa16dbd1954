package sql

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/locker-go/locker/driver"
)

var _ driver.FenceFloorer = (*sqlDriver)(nil)

// Fence floors: each table draws its fences from one counter (Postgres: a
// sequence; MySQL and SQLite: a row), so raising it raises every key's.
// A row is raised to the floor under its lock. A sequence has no atomic
// "at least": the statement draws a value first; below a gap of 65,536 it
// draws the gap, value by value (exact); above, it sets the sequence to
// the floor, which would lower it only if other sessions drew past the
// floor while that one statement ran: 65,536 values.
const (
	pgRaise = `WITH x AS MATERIALIZED (SELECT nextval('"{tn}_fence"') AS n)
SELECT CASE WHEN x.n >= $1::bigint THEN x.n
	WHEN $1::bigint - x.n <= 65536 THEN (SELECT max(nextval('"{tn}_fence"')) FROM generate_series(1, ($1::bigint - x.n)::int))
	ELSE setval('"{tn}_fence"', $1::bigint) END FROM x`
	myRaise     = "UPDATE `{tn}_fence` SET v = GREATEST(v, ?) WHERE id = 1"
	sqliteRaise = `UPDATE "{tn}_fence" SET v = max(v, $1) WHERE id = 1`
)

// RaiseFence raises the counter of key's table (the subtree table for
// the Subtree space) to floor: every later fence is above it.
func (d *sqlDriver) RaiseFence(ctx context.Context, space driver.Space, _ string, floor uint64) error {
	t, err := d.spaceDriver(ctx, space)
	switch {
	case err != nil:
		return err
	case floor == 0:
		return nil
	case floor > math.MaxInt64:
		return fmt.Errorf("locker/sql: fence floor %d is above the fence column's range: %w", floor, errors.ErrUnsupported)
	}
	return t.retry(ctx, func(ctx context.Context) error {
		_, err := t.db.ExecContext(ctx, t.q.raise, int64(floor))
		return err
	}, nil)
}

// raiseFor raises the counter to the highest Floor of rs, once per call,
// before its first attempt: a round trip more, for a Migration's requests.
func (d *sqlDriver) raiseFor(ctx context.Context, rs ...*driver.Request) error {
	var floor uint64
	for _, r := range rs {
		if c := callOf(r); !c.raised {
			floor = max(floor, r.Floor)
		}
	}
	if err := d.RaiseFence(ctx, rs[0].Space, rs[0].Key, floor); err != nil {
		return err
	}
	for _, r := range rs {
		callOf(r).raised = true
	}
	return nil
}
