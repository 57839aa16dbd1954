package sql

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/locker-go/locker/driver"
)

// Watches (locker.Observe) on Postgres ride the process's LISTEN
// connection: the Locker announces an election's grants and releases
// (driver.Announcer) by a NOTIFY of the key's watch token, which the
// listener hands to the hub as it does a waiter's. A leader that dies is
// seen at its expiry, which Status reports. MySQL and SQLite have no
// notification between processes (their waiters poll): Watch declines,
// and an observer reads on a timer.

// watchToken names key's watchers on the table's channel: a hash, so
// that any key fits a payload with no space in it (a collision costs a
// watcher one more look).
func watchToken(key string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return fmt.Sprintf("o:%016x", h.Sum64())
}

// Watch signals key's announcements, and every reconnect of the LISTEN
// connection (one may have been lost meanwhile); driver.ErrSkip where
// there is no LISTEN.
func (d *sqlDriver) Watch(ctx context.Context, space driver.Space, key string) (<-chan struct{}, func(), error) {
	if space == driver.Subtree && d.openTree != nil { // to the tree driver
		t, err := d.treeDriver(ctx)
		if err != nil {
			return nil, nil, err
		}
		return t.Watch(ctx, space, key)
	}
	if !d.announces() {
		return nil, nil, driver.ErrSkip
	}
	return d.hub.Subscribe(ctx, watchToken(key))
}

// Announce NOTIFYs key's watchers; nothing where there is no LISTEN.
func (d *sqlDriver) Announce(ctx context.Context, space driver.Space, key string) error {
	if space == driver.Subtree && d.openTree != nil {
		t, err := d.treeDriver(ctx)
		if err != nil {
			return err
		}
		return t.Announce(ctx, space, key)
	}
	if !d.announces() {
		return nil
	}
	return d.mq.notify.exec(ctx, d.db, watchToken(key))
}

// announces reports whether the database carries announcements: a
// LISTEN connection (Postgres over pgx).
func (d *sqlDriver) announces() bool {
	return !d.poll && d.listening != nil && d.mq.notify.q != ""
}

var (
	_ driver.Watcher   = (*sqlDriver)(nil)
	_ driver.Announcer = (*sqlDriver)(nil)
)
