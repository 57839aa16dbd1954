package redis

import (
	"cmp"
	"context"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/driver"
)

// On a slotted cluster a release reaches its waiters through sharded
// pub/sub: the scripts SPUBLISH on the lock's own channel for the
// waiter's Locker (in the lock's slot, so on its master alone: the lock's
// channel and the Locker's id), and a Locker listens on its channel of
// each lock it has waiters of, one subscription (one connection to that
// lock's master) shared by them and ended shardLinger after the last
// that waited leaves: a cluster relays no release to every node, as it
// does a PUBLISH, and a release reaches no Locker but its waiter's (8
// Lockers on one lock each heard every grant on the lock's channel
// alone). The scripts publish on the lock's channel too, where the
// Lockers of earlier versions listen. While it is up, a Lock on the key subscribes before its
// first attempt (ListeningFor), but one granted at that attempt does not
// make it last longer. The linger keeps a lock waited for again and again
// on one subscription: ended with its last waiter, each contended Lock of
// a Locker that waits alone opened a connection, HELLO and SSUBSCRIBE
// anew (2,000 connections in 2,000 hand-offs of 8 Lockers).

// shardLinger is how long a shard subscription outlives its last waiter.
const shardLinger = time.Second

// wake is what the scripts are told to publish on for key in space: the
// Locker channels' prefix, or "s:" and the lock's shard channel.
func (d *redisDriver) wake(space driver.Space, key string) string {
	if d.slotted() {
		return "s:" + d.shardChannel(space, key)
	}
	return d.wakePrefix()
}

// shardChannel is the shard channel of key's lock: in its slot.
func (d *redisDriver) shardChannel(space driver.Space, key string) string {
	return d.prefix + "w:" + d.tag(space, key)
}

// ownShardChannel is this Locker's channel of key's lock, the scripts'
// shardChannel and the waiter's Locker id (see notifyLua).
func (d *redisDriver) ownShardChannel(space driver.Space, key string) string {
	return d.shardChannel(space, key) + ":" + d.sub.id
}

// shards holds a Locker's shard subscriptions, by channel.
type shards struct {
	cc     *goredis.ClusterClient
	sub    *subscriber   // whose hub the messages wake
	linger time.Duration // shardLinger, or a test's

	mu   sync.Mutex
	subs map[string]*shardSub
}

// shardSub is one channel's subscription and how many waiters use it.
type shardSub struct {
	ready chan struct{} // closed once subscribed, or failed (err)
	err   error
	ps    *goredis.PubSub
	users int
	idle  *time.Timer   // ends it once it has had no user for the linger
	until time.Time     // when idle ends it, as the last waiter that waited left it
	done  chan struct{} // closed when its dispatch returns
}

// join subscribes channel for one more waiter, and returns once the
// server confirmed it (or ctx ended: then the waiter is not counted),
// with the subscription to leave when the waiter is done.
func (x *shards) join(ctx context.Context, channel string) (*shardSub, error) {
	x.mu.Lock()
	s := x.subs[channel]
	if s == nil {
		s = &shardSub{ready: make(chan struct{}), done: make(chan struct{})}
		x.subs[channel] = s
		go x.open(channel, s)
	}
	if s.users++; s.idle != nil {
		s.idle.Stop() // should it fire meanwhile, it finds a user and keeps s
		s.idle = nil
	}
	x.mu.Unlock()
	select {
	case <-s.ready:
		if s.err == nil {
			return s, nil
		}
		x.leave(channel, s, false)
		return nil, backendErr(ctx, s.err)
	case <-ctx.Done():
		x.leave(channel, s, false)
		return nil, backendErr(ctx, ctx.Err())
	}
}

// live reports whether channel is subscribed: a join now costs no round
// trip (unless its linger ends first).
func (x *shards) live(channel string) bool {
	x.mu.Lock()
	s := x.subs[channel]
	x.mu.Unlock()
	if s == nil {
		return false
	}
	select {
	case <-s.ready:
		return s.err == nil
	default:
		return false
	}
}

// open subscribes channel and dispatches its messages until it closes.
func (x *shards) open(channel string, s *shardSub) {
	ps := x.cc.SSubscribe(context.Background(), channel)
	if _, err := ps.Receive(context.Background()); err != nil { // the confirmation
		s.err = err
		close(s.ready)
		close(s.done)
		_ = ps.Close()
		x.mu.Lock()
		if x.subs[channel] == s {
			delete(x.subs, channel) // the next waiter tries again
		}
		x.mu.Unlock()
		return
	}
	s.ps = ps
	close(s.ready)
	defer close(s.done)
	for m := range ps.ChannelWithSubscriptions() {
		switch m := m.(type) {
		case *goredis.Message:
			token := strings.TrimPrefix(m.Payload, "g ")
			if strings.HasPrefix(token, x.sub.id+".") { // the channel is ours: a guard
				x.sub.hub.Notify(x.sub.note(m.Payload))
			}
		case *goredis.Subscription:
			if m.Kind == "ssubscribe" { // go-redis subscribing again after a reconnect: a message may be lost
				x.sub.log.Info("locker/redis: subscribed again after a reconnect; waiters look again", "channel", m.Channel)
				x.sub.hub.NotifyAll()
			}
		}
	}
}

// leave counts a call out of s, channel's subscription; the linger after
// the last that waited (was refused) closes it. A call that took the key
// at its first attempt, having joined because the subscription was up
// (ListeningFor), does not lengthen it: a key contended once and taken
// uncontended ever since would keep a connection for good. (One that
// failed is gone already.)
func (x *shards) leave(channel string, s *shardSub, waited bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.subs[channel] != s {
		return
	}
	if waited || s.until.IsZero() {
		s.until = time.Now().Add(cmp.Or(x.linger, shardLinger))
	}
	if s.users--; s.users == 0 {
		s.idle = time.AfterFunc(time.Until(s.until), func() { x.expire(channel, s) })
	}
}

// expire closes s, channel's subscription, if it still has no user.
func (x *shards) expire(channel string, s *shardSub) {
	x.mu.Lock()
	if x.subs[channel] != s || s.users > 0 {
		x.mu.Unlock()
		return
	}
	delete(x.subs, channel)
	x.mu.Unlock()
	<-s.ready
	if s.ps != nil {
		_ = s.ps.Close()
		<-s.done
	}
}

// close closes every subscription.
func (x *shards) close() {
	x.mu.Lock()
	subs := x.subs
	x.subs = map[string]*shardSub{}
	for _, s := range subs {
		if s.idle != nil {
			s.idle.Stop()
		}
	}
	x.mu.Unlock()
	for _, s := range subs {
		<-s.ready
		if s.ps != nil {
			_ = s.ps.Close()
			<-s.done
		}
	}
}
