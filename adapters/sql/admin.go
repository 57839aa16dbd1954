package sql

import (
	"context"
	dbsql "database/sql"
	"fmt"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// Status returns the live holder of key, or ErrNotHeld.
func (d *sqlDriver) Status(ctx context.Context, key string) (driver.LockInfo, error) {
	infos, err := d.query(ctx, d.q.info+` AND "key" = $1`, key)
	if err != nil {
		return driver.LockInfo{}, err
	}
	if len(infos) == 0 {
		return driver.LockInfo{}, fmt.Errorf("%w: %q", locker.ErrNotHeld, key)
	}
	return infos[0], nil
}

// List returns the live locks whose keys begin with prefix.
func (d *sqlDriver) List(ctx context.Context, prefix string) ([]driver.LockInfo, error) {
	return d.query(ctx, d.q.info+" AND "+d.q.prefix, prefix)
}

// ForceUnlock deletes key's row whoever holds it and wakes its waiters; the
// holder's next refresh finds the row gone and reports ErrLeaseLost.
func (d *sqlDriver) ForceUnlock(ctx context.Context, key string) error {
	var (
		held     bool
		notified int
	)
	if err := d.row(ctx, d.q.force, []any{key}, &held, &notified); err != nil {
		return err
	}
	d.notify(key)
	if !held {
		return fmt.Errorf("%w: %q", locker.ErrNotHeld, key)
	}
	return nil
}

func (d *sqlDriver) query(ctx context.Context, q string, args ...any) ([]driver.LockInfo, error) {
	var infos []driver.LockInfo
	err := d.retry(ctx, func(ctx context.Context) error {
		infos = infos[:0]
		rows, err := d.db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return scanInfos(rows, &infos)
	}, nil)
	return infos, err
}

func scanInfos(rows *dbsql.Rows, infos *[]driver.LockInfo) error {
	for rows.Next() {
		var (
			i  driver.LockInfo
			ms int64
		)
		if err := rows.Scan(&i.Key, &i.Owner, &i.Fence, &i.Holds, &ms); err != nil {
			return err
		}
		i.Expires = time.UnixMilli(ms)
		*infos = append(*infos, i)
	}
	return rows.Err()
}
