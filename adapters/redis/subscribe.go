package redis

import (
	"context"
	"crypto/rand"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/internal/wait"
)

// subscriber is a Locker's one pub/sub connection, listening on a channel
// of the Locker's own, prefix+"w:"+id. A waiter's token is id+"."+call, so
// a release script that finds the token at the head of a key's queue knows
// which client's channel to publish it on, and only that client wakes. The
// channel is subscribed when the Locker first waits and kept until Close:
// later waits cost no subscription round trips.
type subscriber struct {
	client  goredis.UniversalClient
	id      string
	channel string
	hub     *wait.Hub // waiters by token

	mu        sync.Mutex
	ps        *goredis.PubSub
	confirmed chan struct{} // closed on the first SUBSCRIBE confirmation
	done      chan struct{} // closed when dispatch returns
}

func newSubscriber(client goredis.UniversalClient, prefix string) *subscriber {
	id := rand.Text()
	s := &subscriber{client: client, id: id, channel: prefix + id, confirmed: make(chan struct{})}
	s.hub = wait.NewHub(s)
	return s
}

// token names a waiting call of this Locker in a key's queue.
func (s *subscriber) token(call string) string { return s.id + "." + call }

// live reports whether the channel is subscribed, so that a waiter can
// register with the hub before its first attempt and skip Until's second.
func (s *subscriber) live() bool {
	select {
	case <-s.confirmed:
		return true
	default:
		return false
	}
}

// Subscribe implements wait.Channel: the hub calls it for each new waiter;
// it subscribes the Locker's channel once and returns when Redis confirms.
func (s *subscriber) Subscribe(ctx context.Context, _ string) error {
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
			s.hub.Notify(m.Payload)
		case *goredis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			if s.live() {
				s.hub.NotifyAll()
			} else {
				close(s.confirmed)
			}
		}
	}
}

func (s *subscriber) close() error {
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
