package sql

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// Status returns the live holders of key in space, or ErrNotHeld.
func (d *sqlDriver) Status(ctx context.Context, space driver.Space, key string) (driver.LockInfo, error) {
	t, err := d.spaceDriver(ctx, space)
	if err != nil {
		return driver.LockInfo{}, err
	}
	infos, err := t.infos(ctx, space, t.q.status, t.mq.infoSharedByKey, key)
	if err != nil {
		return driver.LockInfo{}, err
	}
	if len(infos) == 0 {
		return driver.LockInfo{}, fmt.Errorf("%w: %q", locker.ErrNotHeld, key)
	}
	return infos[0], nil
}

// List returns the live locks whose keys begin with prefix, subtree locks
// included.
func (d *sqlDriver) List(ctx context.Context, prefix string) ([]driver.LockInfo, error) {
	infos, err := d.infos(ctx, driver.Plain, d.q.list, d.mq.byKP, prefix)
	if err != nil {
		return nil, err
	}
	t, err := d.treeDriver(ctx)
	if err != nil {
		return nil, err
	}
	more, err := t.infos(ctx, driver.Subtree, t.q.list, t.mq.byKP, prefix)
	return append(infos, more...), err
}

// ForceUnlock deletes key's Shared, Limited and Exclusive holders in space,
// whoever they are, and wakes its waiters.
func (d *sqlDriver) ForceUnlock(ctx context.Context, space driver.Space, key string) error {
	t, err := d.spaceDriver(ctx, space)
	if err != nil {
		return err
	}
	var held bool
	if err := t.retry(ctx, func(ctx context.Context) (err error) {
		held, err = forceModal(ctx, t, key)
		return err
	}, nil); err != nil {
		return err
	}
	t.notify(key)
	if !held {
		return fmt.Errorf("%w: %q", locker.ErrNotHeld, key)
	}
	return nil
}

// infos returns the locks of space that q (an info statement over the
// lock table: its Exclusive holders) and modal (over the holders table:
// its Shared and Limited holders) find by arg.
func (d *sqlDriver) infos(ctx context.Context, space driver.Space, q string, modal stmt, arg string) ([]driver.LockInfo, error) {
	var infos []driver.LockInfo
	byKey := map[string]int{}
	err := d.retry(ctx, func(ctx context.Context) error {
		infos, byKey = infos[:0], map[string]int{}
		if err := d.scanInfos(ctx, q, []any{arg}, false, func(i driver.Holder, key string, _ driver.Mode, _ int) {
			if i.Owner != "" { // not a header
				byKey[key] = len(infos)
				infos = append(infos, driver.LockInfo{Key: key, Mode: driver.Exclusive, Space: space, Holders: []driver.Holder{i}})
			}
		}); err != nil {
			return err
		}
		return d.scanInfos(ctx, modal.q, modal.args([]any{arg}), true, func(i driver.Holder, key string, mode driver.Mode, lim int) {
			n, ok := byKey[key]
			if !ok {
				n, byKey[key] = len(infos), len(infos)
				infos = append(infos, driver.LockInfo{Key: key, Mode: driver.Shared, Space: space})
			}
			if mode == driver.Limited {
				infos[n].Mode, infos[n].Limit = driver.Limited, lim
			}
			infos[n].Holders = append(infos[n].Holders, i)
		})
	}, nil)
	for n := range infos {
		in := &infos[n]
		slices.SortFunc(in.Holders, func(a, b driver.Holder) int { return cmp.Compare(a.Fence, b.Fence) })
		first := in.Holders[0]
		in.Owner, in.Fence, in.Holds, in.Expires = first.Owner, first.Fence, first.Holds, first.Expires
		if in.Mode == driver.Exclusive {
			in.Holders = nil // the Locker fills them in
		}
	}
	return infos, err
}

// scanInfos runs q, an info statement, and passes each row to add; with
// modal, its rows also have a holder's mode and lim (else Exclusive, 0).
func (d *sqlDriver) scanInfos(ctx context.Context, q string, args []any, modal bool, add func(i driver.Holder, key string, mode driver.Mode, lim int)) error {
	rows, err := d.pool().QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			i         driver.Holder
			key       string
			ms        int64
			mode, lim int
		)
		dest := []any{&key, &i.Owner, &i.Fence, &i.Holds, &ms}
		if modal {
			dest = append(dest, &mode, &lim)
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		i.Expires = time.UnixMilli(ms)
		add(i, key, driver.Mode(mode), lim)
	}
	return rows.Err()
}
