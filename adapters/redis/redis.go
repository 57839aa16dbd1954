// Package redis is the locker adapter for a single Redis (or a Redis
// Cluster or Sentinel deployment through go-redis's UniversalClient).
//
// Acquire is one atomic script: SET NX PX on the lock key, with the fence
// taken from a per-namespace INCR in the same script; re-entry by a stable
// owner adds a hold id to the value. Release and refresh are scripts
// that check the owner first, so nobody but the owner ever releases a lock.
// Waiters queue in arrival order (a sorted set per key) and a free key goes
// to the first live one, so Lock is fair (FIFO) and a releasing client
// cannot barge ahead of those already waiting. The release script publishes
// on the next waiter's own channel, so only that waiter wakes. Should a
// message be lost, a waiter looks again when the holder's PTTL runs out,
// or after a third of its own TTL, which is also how it keeps its place:
// a crashed waiter's place lapses after its TTL, as a crashed holder's
// lease does. TryLock never queues and fails while others wait.
//
// The fence counter lives at prefix+"fence". A counter lost with the
// server's data (a restart without persistence) starts again from the
// server's clock in microseconds, so fences never go back. With a Cluster
// client, choose
// a prefix with a hash tag, e.g. "{locker}:", so that the lock keys and the
// counter share a slot, as a Lua script requires.
//
// What it survives: a crashed holder (the key expires at its TTL). What it
// does not: the loss of the Redis node, or a failover to a replica that had
// not yet received the lock (replication is asynchronous); use Redlock
// (adapters/redsync) or a consensus backend for that.
package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// DefaultPrefix namespaces the keys this adapter writes.
const DefaultPrefix = "locker:"

// Option configures New.
type Option func(*config)

type config struct {
	prefix      string
	closeClient bool
}

// WithPrefix sets the namespace of every Redis key and channel the adapter
// uses (default "locker:"). Lockers with different prefixes never conflict.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// withCloseClient makes Close also close the client (for Open's clients).
func withCloseClient() Option { return func(c *config) { c.closeClient = true } }

// redisDriver is the driver.Driver (with Notifier and Admin) over one
// go-redis client.
type redisDriver struct {
	client goredis.UniversalClient
	cfg    config
	sub    *subscriber
}

// New returns a Locker over client. The client stays the caller's: Close
// does not close it.
func New(client goredis.UniversalClient, opts ...Option) (locker.Locker, error) {
	if client == nil {
		return nil, errors.New("locker/redis: nil client")
	}
	cfg := config{prefix: DefaultPrefix}
	for _, o := range opts {
		o(&cfg)
	}
	d := &redisDriver{client: client, cfg: cfg}
	d.sub = newSubscriber(client, d.wakePrefix())
	return locker.New(d), nil
}

func (d *redisDriver) lockKey(key string) string { return d.cfg.prefix + "lock:" + key }

// keys are the lock's keys in the order the scripts take them.
func (d *redisDriver) keys(key string) []string {
	return []string{d.lockKey(key), d.cfg.prefix + "queue:" + key, d.cfg.prefix + "qexp:" + key}
}

// wakePrefix is what the scripts prepend to a waiter's client id to name
// the channel its turn is announced on.
func (d *redisDriver) wakePrefix() string { return d.cfg.prefix + "w:" }
func (d *redisDriver) fenceKey() string   { return d.cfg.prefix + "fence" }

// Acquire runs the acquire script once. The call's token is the id of the
// hold it takes (so Abandon can find it) and, once the call listens
// (r.Queue), its place in the key's queue; TryLock never queues.
func (d *redisDriver) Acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	ttl := max(r.TTL.Milliseconds(), 1)
	k := d.keys(r.Key)
	call, place := d.sub.token(r.ID), ""
	if r.Queue {
		place = call
	}
	res, err := acquireScript.Run(ctx, d.client, []string{k[0], d.fenceKey(), k[1], k[2]}, r.Owner, ttl, call, place).Int64Slice()
	if err != nil {
		return driver.Grant{}, backendErr(ctx, err)
	}
	if res[0] == 0 {
		retry := time.Duration(res[1]) * time.Millisecond // 0: expiring now
		if res[1] == -1 {                                 // a key without expiry: not ours; look again after our TTL
			retry = r.TTL
		}
		if r.Queue {
			retry = min(retry, r.TTL/3) // look again in time to keep our place
		}
		return driver.Grant{Retry: retry}, nil
	}
	return driver.Grant{Fence: uint64(res[1]), Hold: &hold{d: d, key: r.Key, owner: r.Owner, ttl: ttl, id: call}}, nil
}

// Abandon undoes what a failed call may have left: its place in the
// queue, and a hold that the backend granted although the reply never
// came back (ctx ended, connection lost).
func (d *redisDriver) Abandon(ctx context.Context, r *driver.Request) {
	_ = abandonScript.Run(ctx, d.client, d.keys(r.Key), d.sub.token(r.ID), d.wakePrefix()).Err()
}

// Subscribe listens for the call's turn: a release publishes the next
// waiter's token on its Locker's channel.
func (d *redisDriver) Subscribe(ctx context.Context, r *driver.Request) (<-chan struct{}, func(), error) {
	return d.sub.hub.Subscribe(ctx, d.sub.token(r.ID))
}

// Listening is true once the Locker's channel is up: later waits then
// subscribe for free, and queue from their first attempt.
func (d *redisDriver) Listening() bool { return d.sub.live() }

// Close closes the subscription (and the client, if Open made it).
func (d *redisDriver) Close(context.Context) error {
	err := d.sub.close()
	if d.cfg.closeClient {
		err = errors.Join(err, d.client.Close())
	}
	return err
}

// hold is one lease's owner-checked backend calls.
type hold struct {
	d          *redisDriver
	key, owner string
	ttl        int64  // ms
	id         string // our hold's id in the lock's value
	unsure     bool   // a Release got no answer: it may have been applied
}

func (h *hold) Refresh(ctx context.Context) (time.Duration, error) {
	ok, err := refreshScript.Run(ctx, h.d.client, []string{h.d.lockKey(h.key)}, h.owner, h.ttl, h.id).Int()
	if err != nil {
		return 0, backendErr(ctx, err)
	}
	if ok == 0 {
		return 0, locker.ErrNotHeld
	}
	return time.Duration(h.ttl) * time.Millisecond, nil
}

func (h *hold) Release(ctx context.Context) error {
	ok, err := releaseScript.Run(ctx, h.d.client, h.d.keys(h.key), h.owner, h.id, h.d.wakePrefix()).Int()
	if err != nil {
		h.unsure = true // the lease serialises Release calls
		return backendErr(ctx, err)
	}
	if ok == 0 && !h.unsure { // after a lost reply, a hold gone is our release
		return locker.ErrNotHeld
	}
	return nil
}

// backendErr marks a failed call as ErrUnavailable unless ctx ended it.
func backendErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("locker/redis: %w", ctx.Err())
	}
	if strings.HasPrefix(err.Error(), "NOSCRIPT") || errors.Is(err, goredis.Nil) {
		return fmt.Errorf("locker/redis: %w", err)
	}
	return locker.Unavailable(fmt.Errorf("locker/redis: %w", err))
}
