package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/driver"
)

// Watches (locker.Observe): the scripts publish nothing on a grant, so the
// Locker announces an election's grants and releases (driver.Announcer) on
// a channel of the key's own, in its slot on a slotted cluster; a watcher
// subscribes to it on a connection of its own. A leader that dies is seen
// at its expiry, which Status reports.

// watchChannel is the channel of key's announcements.
func (d *redisDriver) watchChannel(space driver.Space, key string) string {
	return d.prefix + base(space) + "o:" + d.tag(space, key) + key
}

// Watch subscribes to key's channel and returns once Redis confirmed it.
// A subscription made again after a reconnect signals too: an
// announcement may have been lost meanwhile.
func (d *redisDriver) Watch(ctx context.Context, space driver.Space, key string) (<-chan struct{}, func(), error) {
	ch, bg := d.watchChannel(space, key), context.WithoutCancel(ctx)
	var ps *goredis.PubSub
	if d.slotted() {
		ps = d.client.SSubscribe(bg, ch)
	} else {
		ps = d.client.Subscribe(bg, ch)
	}
	if _, err := ps.Receive(ctx); err != nil { // the confirmation
		_ = ps.Close()
		return nil, nil, backendErr(ctx, err)
	}
	changed, done := make(chan struct{}, 1), make(chan struct{})
	go func() {
		defer close(done)
		for range ps.ChannelWithSubscriptions() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}()
	return changed, func() { _ = ps.Close(); <-done }, nil
}

// Announce publishes a change of key to its watchers.
func (d *redisDriver) Announce(ctx context.Context, space driver.Space, key string) error {
	ch := d.watchChannel(space, key)
	var err error
	if d.slotted() {
		err = d.client.SPublish(ctx, ch, "").Err()
	} else {
		err = d.client.Publish(ctx, ch, "").Err()
	}
	if err != nil {
		return backendErr(ctx, err)
	}
	return nil
}

var (
	_ driver.Watcher   = (*redisDriver)(nil)
	_ driver.Announcer = (*redisDriver)(nil)
)
