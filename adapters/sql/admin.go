package sql

import (
	"context"
	dbsql "database/sql"
	"fmt"
	"time"

	"github.com/locker-go/locker"
)

// Status returns the live holder of key, or ErrNotHeld.
func (l *sqlLocker) Status(ctx context.Context, key string) (locker.LockInfo, error) {
	if err := l.set.CheckKey(key); err != nil {
		return locker.LockInfo{}, err
	}
	q, _ := l.d.info()
	infos, err := l.query(ctx, q+` AND "key" = $1`, key)
	if err != nil {
		return locker.LockInfo{}, err
	}
	if len(infos) == 0 {
		return locker.LockInfo{}, fmt.Errorf("%w: %q", locker.ErrNotHeld, key)
	}
	return infos[0], nil
}

// List returns the live locks whose keys begin with prefix, by key in byte order.
func (l *sqlLocker) List(ctx context.Context, prefix string) ([]locker.LockInfo, error) {
	q, cond := l.d.info()
	return l.query(ctx, q+" AND "+cond+` ORDER BY "key"`, prefix)
}

// ForceUnlock deletes key's row whoever holds it and wakes its waiters; the
// holder's next refresh finds the row gone and reports ErrLeaseLost.
func (l *sqlLocker) ForceUnlock(ctx context.Context, key string) error {
	if err := l.set.CheckKey(key); err != nil {
		return err
	}
	var held bool
	err := l.retry(ctx, func(ctx context.Context) (err error) {
		held, err = l.d.forceUnlock(ctx, l.db, key)
		return err
	}, nil)
	if err != nil {
		return err
	}
	if l.poll {
		l.hub.Notify(key)
	}
	if !held {
		return fmt.Errorf("%w: %q", locker.ErrNotHeld, key)
	}
	return nil
}

func (l *sqlLocker) query(ctx context.Context, q string, args ...any) ([]locker.LockInfo, error) {
	if err := l.set.Check(); err != nil {
		return nil, err
	}
	var infos []locker.LockInfo
	err := l.retry(ctx, func(ctx context.Context) error {
		infos = infos[:0]
		rows, err := l.db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		return scanInfos(rows, &infos)
	}, nil)
	return infos, err
}

func scanInfos(rows *dbsql.Rows, infos *[]locker.LockInfo) error {
	defer rows.Close()
	for rows.Next() {
		var (
			i  locker.LockInfo
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
