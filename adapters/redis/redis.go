// Package redis is the locker adapter for a single Redis, a Redis Cluster
// (redis-cluster://) or a Sentinel deployment through go-redis's
// UniversalClient.
//
// Acquire, refresh and release are atomic scripts that check the owner
// first, so nobody but the owner ever extends or releases a lock. Waiters
// queue in arrival order and a free key goes to the first live one, so Lock
// is fair (FIFO) and a releasing client cannot barge ahead; the release
// wakes only that waiter. An exclusive release whose first waiter is
// exclusive hands it the key in the same script (a fence drawn then) and
// tells it so: the waiter holds the key without a round trip of its own
// (8 workers on one key over a network with a 1 ms round trip: 255 ops/s,
// 160 with the waiter's own acquire; on loopback no difference shows). Should the message be lost, a waiter looks again
// when the holder's PTTL runs out, or after a third of its own TTL, which
// also keeps its place: a crashed waiter's place lapses after its TTL.
// TryLock never queues and fails while others wait.
//
// Shared, intention and subtree locks (driver.ModeKeeper): a key's holders
// are a hash of owner-and-mode records with a count per mode, and the
// queue's tokens carry their waiter's mode, so that one script applies the
// whole grant rule: a request is granted if no holder's mode and no
// earlier waiter's mode excludes it, without scanning the compatible ones
// (a subtree's top node may have thousands of intention holders). A
// release wakes every waiter it admits (all the readers at the head of
// the queue). An exclusive holder is alone, so the key's own expiry is its
// lapse; the others lapse by a sorted set of expiries. Subtree paths live
// under "tlock:", "tqueue:", ... apart from plain keys. LockAll and a
// subtree lock take all their keys in one script, and a subtree lease lets
// them go in one (driver.Batcher); on a Cluster, only where the prefix has
// a hash tag (one script cannot reach several slots).
//
// Semaphores (locker.Limit, driver.Limiter) are a fifth mode, Limited, in
// the same scripts: its holders are counted as the others', the key keeps
// their n while it has any, and a Limited request is granted while the
// holders and the Limited waiters queued before it are fewer than n; any
// other mode or n meets ErrModeMismatch, whoever the owner. A release hands
// its slot to the first Limited waiter (and, the last, the slots left to
// the next ones), as it hands an exclusive key over. A client of an earlier
// version does not see Limited holders: use Limit on a prefix once every
// client of it is of this version.
//
// The stored layout of a lock changed with modes (a hash, no longer a
// string): a client of an earlier version meeting a lock of this one, or
// the reverse, fails with Redis's WRONGTYPE error rather than misreading
// it. Upgrade every client of a prefix together, or move to a new prefix.
//
// The fence is an INCR of prefix+"fence"; lost with the server's data (a
// restart without persistence), the counter starts again from the server's
// clock in microseconds, so fences never go back.
//
// Redis Cluster (redis-cluster://host:port,host:port,..., or New with a
// ClusterClient): each lock lives in a hash slot of its own, its keys and
// its own fence counter sharing a hash tag (cluster.go), so locks spread
// over every master; a subtree path's tag is its tree's, so a tree's locks
// and fences share one slot and a subtree lock is one script. LockAll of
// keys in several slots takes them one by one, in order; the keep-alive
// sends one pipeline to each master per tick (a script per lease: one
// script cannot reach several slots), and a master that hangs delays its
// own leases alone (driver.Sharder). Waiters hear releases through sharded
// pub/sub, on their lock's own channel in its slot (shards.go), so a
// release is heard on its master alone. A master killed ends
// the leases on its locks by their Deadline; restarted empty, its counters
// start from its clock. A prefix with a hash tag ("{locker}:") puts every
// lock in that one slot instead, as on one server.
//
// What it survives: a crashed holder (the key expires at its TTL), and a
// Redis killed and restarted on an append-only file fsynced at every write
// (appendonly yes, appendfsync always), which keeps every lock. What it
// does not: a restart without that persistence, which drops the holders'
// keys (fences still rise, so a fenced resource stays safe; otherwise
// delay the restart by the longest TTL), the loss of the Redis node, or a
// failover to a replica that had not yet received the lock (replication is
// asynchronous); use Redlock (adapters/redsync) or a consensus backend for
// that.
package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/urlx"
	"github.com/locker-go/locker/internal/wait"
)

// DefaultPrefix namespaces the keys this adapter writes.
const DefaultPrefix = "locker:"

// Option configures New.
type Option func(*redisDriver)

// WithPrefix sets the namespace of every Redis key and channel the adapter
// uses (default "locker:"). Lockers with different prefixes never conflict.
func WithPrefix(p string) Option { return func(d *redisDriver) { d.prefix = p } }

// WithLogger has the Locker log its rare events to l, as locker.WithLogger
// does for Open: here also the pub/sub connection made again after a
// reconnect (Info).
func WithLogger(l *slog.Logger) Option { return func(d *redisDriver) { d.logger = l } }

// redisDriver is the driver.Driver (with Notifier and Admin) over a client.
type redisDriver struct {
	client      goredis.UniversalClient
	prefix      string
	closeClient bool // Open made the client: Close closes it
	sub         *subscriber
	shards      *shards       // a slotted cluster's shard subscriptions (shards.go); else nil
	shardLinger time.Duration // shards' linger if set (a test's: export_test.go)
	logger      *slog.Logger  // WithLogger's, for locker.New
	driver.Log
}

// New returns a Locker over client. The client stays the caller's: Close
// does not close it.
func New(client goredis.UniversalClient, opts ...Option) (locker.Locker, error) {
	if client == nil {
		return nil, errors.New("locker/redis: nil client")
	}
	d := &redisDriver{client: client, prefix: DefaultPrefix}
	for _, o := range opts {
		o(d)
	}
	d.sub = newSubscriber(client, d.wakePrefix(), &d.Log)
	if cc, ok := client.(*goredis.ClusterClient); ok && d.slotted() {
		d.shards = &shards{cc: cc, sub: d.sub, subs: map[string]*shardSub{}, linger: d.shardLinger}
		d.sub.sharded = true
	}
	return locker.New(d, locker.WithLogger(d.logger)), nil
}

func init() {
	locker.Register("redis", Open)
	locker.Register("rediss", Open)
	locker.Register("redis-cluster", openCluster)
}

// Open returns a Locker for a URL of the form
//
//	redis://[user:password@]host:port[/db][?prefix=locker:&...]
//	rediss://...   (TLS)
//
// prefix sets WithPrefix; every other query parameter is go-redis's (see
// redis.ParseURL, e.g. dial_timeout, pool_size). Open pings the server, so
// an unreachable one is reported at once, as ErrUnavailable.
func Open(ctx context.Context, u *url.URL) (locker.Locker, error) {
	switch hosts, err := urlx.Hosts(u.Host, "6379"); {
	case err != nil:
		return nil, urlx.Invalid(u, "%v", err)
	case len(hosts) > 1:
		return nil, urlx.Invalid(u, "%s names one server; a cluster is redis-cluster://, several independent masters redlock://", u.Scheme)
	}
	q := u.Query()
	opts := []Option{func(d *redisDriver) { d.closeClient = true }}
	if q.Has("prefix") {
		opts = append(opts, WithPrefix(q.Get("prefix")))
		q.Del("prefix")
	}
	bare := *u
	bare.RawQuery = q.Encode()
	o, err := goredis.ParseURL(bare.String())
	if err != nil {
		// go-redis errors may quote the URL; name only the redacted one.
		return nil, fmt.Errorf("%w: %s: %v", locker.ErrInvalidURL, urlx.Redact(u), urlx.Scrub(err.Error(), u))
	}
	client := goredis.NewClient(o)
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, locker.Unavailable(fmt.Errorf("locker/redis: %s: %v", o.Addr, urlx.Scrub(err.Error(), u)))
	}
	return New(client, opts...)
}

// base is the first part of the names of a space's keys: "" for plain
// keys, "t" for subtree paths ("tlock:a/b"), so the spaces never meet.
func base(space driver.Space) string {
	if space == driver.Subtree {
		return "t"
	}
	return ""
}

func (d *redisDriver) lockKey(space driver.Space, key string) string {
	return d.prefix + base(space) + "lock:" + d.tag(space, key) + key
}

// keys are the lock's keys in the order the scripts take them: lock, exp,
// queue, qexp (see scripts.go).
func (d *redisDriver) keys(space driver.Space, key string) []string {
	b, t := d.prefix+base(space), d.tag(space, key)+key
	return []string{b + "lock:" + t, b + "exp:" + t, b + "queue:" + t, b + "qexp:" + t}
}

// fenceKey is the counter of the fences of key in space: the prefix's one,
// or on a slotted cluster the lock's own (its tree's, for a subtree path).
func (d *redisDriver) fenceKey(space driver.Space, key string) string {
	if d.slotted() {
		return d.prefix + "fence:" + d.tag(space, key)
	}
	return d.prefix + "fence"
}

// wakePrefix and a waiter's client id name the channel of its turn.
func (d *redisDriver) wakePrefix() string { return d.prefix + "w:" }

// KeepsModes declares that the scripts grant by driver.ModeKeeper's rule.
func (d *redisDriver) KeepsModes() {}

// KeepsLimits declares that the scripts grant Limited requests by
// driver.Limiter's rule (see limit in scripts.go).
func (d *redisDriver) KeepsLimits() {}

var _ driver.Limiter = (*redisDriver)(nil)

// place is r's token in its key's queue once it listens (r.Queue), else
// "": its hold's id and its mode.
func (d *redisDriver) place(r *driver.Request) string {
	if !r.Queue {
		return ""
	}
	return d.sub.waiter(r)
}

// Acquire runs the acquire script once. The call's token is the id of its
// hold and, once the call listens (r.Queue), with its mode its place in
// the queue.
func (d *redisDriver) Acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	if err := d.raiseFor(ctx, r); err != nil {
		return driver.Grant{}, err
	}
	ttl := max(r.TTL.Milliseconds(), 1)
	call := d.sub.token(r.ID)
	st, _ := r.State.(*callState)
	if st == nil {
		st = &callState{}
		r.State = st
	}
	if fence, ok := d.sub.handed(d.place(r)); ok && !st.sent.IsZero() {
		// A release handed us the key: held since before our last call,
		// which queued us, at the latest (see releaseScript).
		return driver.Grant{Fence: fence, Hold: d.hold(r, call, ttl), Start: st.sent, Validity: validity(r, ttl)}, nil
	}
	st.sent = time.Now()
	keys := append(d.keys(r.Space, r.Key), d.fenceKey(r.Space, r.Key))
	script := acquireScript
	if r.Mode == driver.Exclusive {
		script = exclusiveScript
	}
	res, err := script.Run(ctx, d.client, keys, r.Owner, int(r.Mode), ttl, call, d.place(r), r.Limit).Int64Slice()
	if err != nil {
		return driver.Grant{}, backendErr(ctx, err)
	}
	switch res[0] {
	case -1:
		return driver.Grant{}, mismatch(r, res[1])
	case -2:
		return driver.Grant{}, limitMismatch(r, res[1], res[2])
	case 0:
		st.refused = true
		retry := time.Duration(res[1]) * time.Millisecond // 0: expiring now
		if r.Queue {
			retry = min(retry, r.TTL/3) // look again in time to keep our place
		}
		return driver.Grant{Retry: retry}, nil
	}
	d.sub.handed(d.place(r)) // a hand-off the script found first
	return driver.Grant{Fence: uint64(res[1]), Hold: d.hold(r, call, ttl), Validity: validity(r, ttl)}, nil
}

// validity is a grant's, for r's TTL sent as ttl ms: the TTL in whole
// milliseconds, as the scripts keep it (at least one), no longer than the
// TTL.
func validity(r *driver.Request, ttl int64) time.Duration {
	return min(r.TTL, time.Duration(ttl)*time.Millisecond)
}

// callState is a call's own, between its attempts: when it last sent
// the acquire script, and whether an attempt was refused (it waited).
type callState struct {
	sent    time.Time
	refused bool
}

// waited reports whether r's call was refused at some attempt.
func waited(r *driver.Request) bool {
	st, _ := r.State.(*callState)
	return st != nil && st.refused
}

// hold is the hold of r, granted under the id call.
func (d *redisDriver) hold(r *driver.Request, call string, ttl int64) *hold {
	return &hold{d: d, space: r.Space, key: r.Key, owner: r.Owner, mode: r.Mode, ttl: ttl, id: call}
}

// mismatch is the error of r, whose owner holds its key in mode held.
func mismatch(r *driver.Request, held int64) error {
	return fmt.Errorf("%w: owner %q holds %q as %v, asks for %v", locker.ErrModeMismatch, r.Owner, r.Key, driver.Mode(held), r.Mode)
}

// limitMismatch is the error of r, which meets holders of its key in mode
// held (of Limit n, if Limited) where either they or r are Limited.
func limitMismatch(r *driver.Request, held, n int64) error {
	asked := "as " + r.Mode.String()
	if r.Mode == driver.Limited {
		asked = fmt.Sprintf("by a Limit(%d)", r.Limit)
	}
	if driver.Mode(held) == driver.Limited {
		return fmt.Errorf("%w: %q is held by a Limit(%d), asked for %s", locker.ErrModeMismatch, r.Key, n, asked)
	}
	return fmt.Errorf("%w: %q is held as %v, asked for %s", locker.ErrModeMismatch, r.Key, driver.Mode(held), asked)
}

// Abandon undoes what a failed call may have left: its place in the
// queue, and a hold granted although the reply never came back.
func (d *redisDriver) Abandon(ctx context.Context, r *driver.Request) {
	d.sub.handed(d.sub.waiter(r))
	_ = abandonScript.Run(ctx, d.client, d.keys(r.Space, r.Key), r.Owner, int(r.Mode), d.sub.token(r.ID), d.sub.waiter(r), d.wake(r.Space, r.Key)).Err()
}

// Subscribe listens for the call's turn, announced on its Locker's channel
// (on a slotted cluster, on its Locker's shard channel of the lock).
func (d *redisDriver) Subscribe(ctx context.Context, r *driver.Request) (<-chan struct{}, func(), error) {
	token := d.sub.waiter(r)
	if d.shards == nil {
		wake, stop, err := d.sub.hub.Subscribe(ctx, token)
		if err != nil {
			return nil, nil, err
		}
		return wake, func() { stop(); d.sub.stopped(token) }, nil
	}
	ch := d.ownShardChannel(r.Space, r.Key)
	s, err := d.shards.join(ctx, ch)
	if err != nil {
		return nil, nil, err
	}
	wake, stop, err := d.sub.hub.Subscribe(ctx, token)
	if err != nil {
		d.shards.leave(ch, s, false)
		return nil, nil, err
	}
	return wake, func() { stop(); d.sub.stopped(token); d.shards.leave(ch, s, waited(r)) }, nil
}

// Listening is true once the Locker's channel is up: later waits then
// subscribe for free, and queue from their first attempt. (A lock's shard
// channel may have to be subscribed first, a round trip: never; see
// ListeningFor.)
func (d *redisDriver) Listening() bool { return d.shards == nil && d.sub.live() }

// ListeningFor is Listening for r; on a slotted cluster, true while this
// Locker's shard channel of r's lock is subscribed (by a waiter, or lingering after the
// last that waited: shards.go), so that a Lock on a key waited for lately subscribes
// for free and queues from its first attempt, one script where it took
// two (the first, refused, queued nothing).
func (d *redisDriver) ListeningFor(r *driver.Request) bool {
	if d.shards == nil {
		return d.Listening()
	}
	return d.shards.live(d.ownShardChannel(r.Space, r.Key))
}

var _ driver.KeyListener = (*redisDriver)(nil)

// Close closes the subscription (and the client, if Open made it).
func (d *redisDriver) Close(context.Context) error {
	err := d.sub.close()
	if d.shards != nil {
		d.shards.close()
	}
	if d.closeClient {
		err = errors.Join(err, d.client.Close())
	}
	return err
}

// subscriber is a Locker's one pub/sub connection, on its own channel
// prefix+"w:"+id (see scripts.go), subscribed when the Locker first waits
// and kept until Close: later waits cost no subscription round trips.
type subscriber struct {
	client  goredis.UniversalClient
	id      string
	channel string
	hub     *wait.Hub // waiters by token
	sharded bool      // the waiters listen on the Locker's shard channels of their locks (shards.go)
	log     *driver.Log

	handMu sync.Mutex
	hands  map[string]uint64 // fences of the keys releases handed to our waiters, by token
	gave   map[string]uint64 // the last fence handed to each waiting token (heard)

	mu        sync.Mutex
	ps        *goredis.PubSub
	confirmed chan struct{} // closed on the first SUBSCRIBE confirmation
	done      chan struct{} // closed when dispatch returns
}

func newSubscriber(client goredis.UniversalClient, prefix string, log *driver.Log) *subscriber {
	id := rand.Text()
	s := &subscriber{client: client, id: id, channel: prefix + id, confirmed: make(chan struct{}), log: log}
	s.hub = wait.NewWakeOneHub(s) // any waiter may take a free key
	subscribers.Store(id, s)
	return s
}

// token names a call of this Locker: its hold's id.
func (s *subscriber) token(call string) string { return s.id + "." + call }

// waiter names a waiting call in its key's queue: its token and mode.
func (s *subscriber) waiter(r *driver.Request) string {
	return s.token(r.ID) + ":" + strconv.Itoa(int(r.Mode))
}

// live reports whether the channel is subscribed.
func (s *subscriber) live() bool {
	select {
	case <-s.confirmed:
		return true
	default:
		return false
	}
}

// Subscribe subscribes the Locker's channel once, and returns when Redis
// has confirmed it.
func (s *subscriber) Subscribe(ctx context.Context, _ string) error {
	if s.sharded {
		return nil // the Locker's Subscribe joined its shard channel of the lock
	}
	s.mu.Lock()
	if s.ps == nil {
		s.ps = s.client.Subscribe(context.WithoutCancel(ctx), s.channel)
		s.done = make(chan struct{})
		go s.dispatch(s.ps.ChannelWithSubscriptions(), s.done)
	}
	s.mu.Unlock()
	select {
	case <-s.confirmed:
		return nil
	case <-ctx.Done():
		return backendErr(ctx, ctx.Err())
	}
}

// Unsubscribe implements wait.Channel: the channel stays for later waits.
func (s *subscriber) Unsubscribe(string) {}

// dispatch wakes the waiter each message names. A confirmation after the
// first is go-redis resubscribing after a reconnect, during which a
// message may have been lost: every waiter looks again.
func (s *subscriber) dispatch(msgs <-chan any, done chan struct{}) {
	defer close(done)
	for m := range msgs {
		switch m := m.(type) {
		case *goredis.Message:
			s.hub.Notify(s.note(m.Payload))
		case *goredis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			if s.live() {
				s.log.Info("locker/redis: subscribed again after a reconnect; waiters look again", "channel", m.Channel)
				s.hub.NotifyAll()
			} else {
				close(s.confirmed)
			}
		}
	}
}

// note records a hand-off ("g <token> <fence>", see releaseScript) and
// returns the token the message wakes.
func (s *subscriber) note(msg string) string {
	rest, ok := strings.CutPrefix(msg, "g ")
	if !ok {
		return msg
	}
	token, f, _ := strings.Cut(rest, " ")
	if fence, err := strconv.ParseUint(f, 10, 64); err == nil {
		s.heard(token, fence)
	}
	return token
}

// handed takes the fence of a key handed to waiter token, if any.
func (s *subscriber) handed(token string) (uint64, bool) {
	s.handMu.Lock()
	defer s.handMu.Unlock()
	f, ok := s.hands[token]
	delete(s.hands, token)
	return f, ok
}

func (s *subscriber) close() error {
	subscribers.Delete(s.id)
	s.mu.Lock()
	ps, done := s.ps, s.done
	s.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-done
	return err
}

// hold is one lease's owner-checked backend calls.
type hold struct {
	d          *redisDriver
	space      driver.Space
	key, owner string
	mode       driver.Mode
	ttl        int64  // ms
	id         string // our hold's id in its holder's record
	unsure     bool   // a Release got no answer: it may have been applied
}

func (h *hold) Refresh(ctx context.Context) (time.Duration, error) {
	ok, err := refreshScript.Run(ctx, h.d.client, h.d.keys(h.space, h.key)[:2], h.owner, int(h.mode), h.ttl, h.id).Int()
	if err != nil {
		return 0, backendErr(ctx, err)
	}
	if ok == 0 {
		return 0, locker.ErrNotHeld
	}
	return time.Duration(h.ttl) * time.Millisecond, nil
}

func (h *hold) Release(ctx context.Context) error {
	h.d.sub.handed(h.id + ":" + strconv.Itoa(int(h.mode))) // a hand-off heard after the script granted it
	keys := append(h.d.keys(h.space, h.key), h.d.fenceKey(h.space, h.key))
	res, err := releaseScript.Run(ctx, h.d.client, keys, h.owner, int(h.mode), h.id, h.d.wake(h.space, h.key)).Result()
	if err != nil {
		h.unsure = true // the lease serialises Release calls
		return backendErr(ctx, err)
	}
	handOver(res)
	if !releasedBy(res) && !h.unsure { // after a lost reply, a hold gone is our release
		return locker.ErrNotHeld
	}
	return nil
}

// backendErr marks a failed call as ErrUnavailable unless ctx ended it.
func backendErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("locker/redis: %w", ctx.Err())
	}
	return locker.Unavailable(fmt.Errorf("locker/redis: %w", err))
}
