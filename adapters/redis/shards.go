package redis

import (
	"context"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/driver"
)

// On a slotted cluster a release reaches its waiters through sharded
// pub/sub: the scripts SPUBLISH on the lock's own channel (in the lock's
// slot, so on its master alone), and a Locker listens on the channel of
// each lock it has waiters of, one subscription (one connection to that
// lock's master) shared by them and ended with the last: a cluster relays
// no release to every node, as it does a PUBLISH.

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

// shards holds a Locker's shard subscriptions, by channel.
type shards struct {
	cc  *goredis.ClusterClient
	sub *subscriber // whose hub the messages wake

	mu   sync.Mutex
	subs map[string]*shardSub
}

// shardSub is one channel's subscription and how many waiters use it.
type shardSub struct {
	ready chan struct{} // closed once subscribed, or failed (err)
	err   error
	ps    *goredis.PubSub
	users int
	done  chan struct{} // closed when its dispatch returns
}

// join subscribes channel for one more waiter, and returns once the
// server confirmed it (or ctx ended: then the waiter is not counted).
func (x *shards) join(ctx context.Context, channel string) error {
	x.mu.Lock()
	s := x.subs[channel]
	if s == nil {
		s = &shardSub{ready: make(chan struct{}), done: make(chan struct{})}
		x.subs[channel] = s
		go x.open(channel, s)
	}
	s.users++
	x.mu.Unlock()
	select {
	case <-s.ready:
		if s.err == nil {
			return nil
		}
	case <-ctx.Done():
	}
	x.leave(channel)
	if s.err != nil {
		return backendErr(ctx, s.err)
	}
	return backendErr(ctx, ctx.Err())
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
			if strings.HasPrefix(token, x.sub.id+".") { // others' waiters too listen here
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

// leave counts a waiter out of channel; the last closes it.
func (x *shards) leave(channel string) {
	x.mu.Lock()
	s := x.subs[channel]
	if s == nil {
		x.mu.Unlock()
		return
	}
	s.users--
	last := s.users == 0
	if last {
		delete(x.subs, channel)
	}
	x.mu.Unlock()
	if last {
		go func() {
			<-s.ready
			if s.ps != nil {
				_ = s.ps.Close()
				<-s.done
			}
		}()
	}
}

// close closes every subscription.
func (x *shards) close() {
	x.mu.Lock()
	subs := x.subs
	x.subs = map[string]*shardSub{}
	x.mu.Unlock()
	for _, s := range subs {
		<-s.ready
		if s.ps != nil {
			_ = s.ps.Close()
			<-s.done
		}
	}
}
