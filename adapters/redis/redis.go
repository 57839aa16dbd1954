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
// The fence counter lives at prefix+"fence". With a Cluster client, choose
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
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/lease"
	"github.com/locker-go/locker/internal/wait"
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

// Locker is a locker.Locker and locker.Admin over one go-redis client.
type Locker struct {
	client goredis.UniversalClient
	cfg    config
	set    *lease.Set
	sub    *subscriber
}

var (
	_ locker.Locker = (*Locker)(nil)
	_ locker.Admin  = (*Locker)(nil)
)

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
	l := &Locker{client: client, cfg: cfg, set: lease.NewSet()}
	l.sub = newSubscriber(client, l.wakePrefix())
	return l, nil
}

func (l *Locker) lockKey(key string) string { return l.cfg.prefix + "lock:" + key }

// keys are the lock's keys in the order the scripts take them.
func (l *Locker) keys(key string) []string {
	return []string{l.lockKey(key), l.cfg.prefix + "queue:" + key, l.cfg.prefix + "qexp:" + key}
}

// wakePrefix is what the scripts prepend to a waiter's client id to name
// the channel its turn is announced on.
func (l *Locker) wakePrefix() string { return l.cfg.prefix + "w:" }
func (l *Locker) fenceKey() string   { return l.cfg.prefix + "fence" }

// Lock blocks until key is held. It queues behind earlier waiters and
// sleeps until the release message names it, or until the holder's lease
// or the first waiter's place lapses.
func (l *Locker) Lock(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	ctx, o, end, err := l.set.Begin(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	defer end()
	// token is our place in the queue and the op id of our attempts.
	token := l.sub.token(rand.Text())
	attempt := func(ctx context.Context) (locker.Lease, time.Duration, error) {
		lease, retry, err := l.attempt(ctx, key, token, true, o)
		// Look again within TTL/3 at the latest: that keeps our place.
		return lease, min(retry, o.TTL/3), err
	}
	subscribe := func(ctx context.Context) (<-chan struct{}, func(), error) {
		return l.sub.hub.Subscribe(ctx, token)
	}
	var lease locker.Lease
	if l.sub.live() {
		// The channel is up: listen first, then one attempt per turn.
		var wake <-chan struct{}
		var leave func()
		if wake, leave, err = subscribe(ctx); err == nil {
			lease, err = wait.Subscribed(ctx, key, attempt, wake)
			leave()
		}
	} else {
		lease, err = wait.Until(ctx, key, attempt, subscribe)
	}
	if err != nil {
		l.abandon(ctx, key, token)
	}
	return lease, err
}

// TryLock makes one attempt; ErrLocked if another owner holds key.
func (l *Locker) TryLock(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	ctx, o, end, err := l.set.Begin(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	defer end()
	call := l.sub.token(rand.Text())
	lease, _, err := l.attempt(ctx, key, call, false, o)
	if err != nil && !errors.Is(err, locker.ErrLocked) {
		l.abandon(ctx, key, call)
	}
	return lease, err
}

// abandon undoes what a failed Lock or TryLock call may have left: its
// place in the queue, and a hold that the backend granted although the
// reply never came back (ctx ended, connection lost). ctx may be over: it
// uses a fresh one.
func (l *Locker) abandon(ctx context.Context, key, call string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = abandonScript.Run(ctx, l.client, l.keys(key), call, l.wakePrefix()).Err()
}

// attempt runs the acquire script once. call is the id of the hold it
// takes (so abandon can find it) and, for a waiter (queue), its place in
// the queue; TryLock never queues.
func (l *Locker) attempt(ctx context.Context, key, call string, queue bool, o locker.Options) (locker.Lease, time.Duration, error) {
	start := time.Now()
	ttl := max(o.TTL.Milliseconds(), 1)
	k := l.keys(key)
	token := ""
	if queue {
		token = call
	}
	res, err := acquireScript.Run(ctx, l.client, []string{k[0], l.fenceKey(), k[1], k[2]}, o.Owner, ttl, call, token).Int64Slice()
	if err != nil {
		return nil, 0, backendErr(ctx, err)
	}
	if res[0] == 0 {
		retry := time.Duration(res[1]) * time.Millisecond // 0: expiring now
		if res[1] == -1 {                                 // a key without expiry: not ours; look again after our TTL
			retry = o.TTL
		}
		return nil, retry, fmt.Errorf("%w: %q", locker.ErrLocked, key)
	}
	ls, err := lease.New(l.set, lease.Config{
		Key: key, Owner: o.Owner, Fence: uint64(res[1]),
		TTL: o.TTL, KeepAlive: o.KeepAlive, Start: start,
		Ops: &hold{l: l, key: key, owner: o.Owner, ttl: ttl, id: call},
	})
	if err != nil {
		return nil, 0, err
	}
	return ls, 0, nil
}

// Close ends waiting Lock calls, releases held leases best-effort and
// closes the subscription (and the client, if Open made it).
func (l *Locker) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.set.Close(ctx); err != nil {
		return err
	}
	err := l.sub.close()
	if l.cfg.closeClient {
		err = errors.Join(err, l.client.Close())
	}
	return err
}

// hold is one lease's owner-checked backend calls.
type hold struct {
	l          *Locker
	key, owner string
	ttl        int64  // ms
	id         string // our hold's id in the lock's value
	unsure     bool   // a Release got no answer: it may have been applied
}

func (h *hold) Refresh(ctx context.Context) (time.Duration, error) {
	ok, err := refreshScript.Run(ctx, h.l.client, []string{h.l.lockKey(h.key)}, h.owner, h.ttl, h.id).Int()
	if err != nil {
		return 0, backendErr(ctx, err)
	}
	if ok == 0 {
		return 0, locker.ErrNotHeld
	}
	return time.Duration(h.ttl) * time.Millisecond, nil
}

func (h *hold) Release(ctx context.Context) error {
	ok, err := releaseScript.Run(ctx, h.l.client, h.l.keys(h.key), h.owner, h.id, h.l.wakePrefix()).Int()
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
