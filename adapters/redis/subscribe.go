package redis

import (
	"context"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/internal/wait"
)

// subscriber is a Locker's one pub/sub connection. It subscribes to a
// key's release channel while the Locker has waiters for that key and
// wakes them through the hub. The connection is opened on first use, so
// a Locker that never waits never holds one.
type subscriber struct {
	client goredis.UniversalClient
	prefix string // channel name prefix; the rest is the key
	hub    *wait.Hub

	mu      sync.Mutex
	ps      *goredis.PubSub
	pending map[string]chan struct{} // channel -> closed on subscribe confirmation
	done    chan struct{}
}

func newSubscriber(client goredis.UniversalClient, prefix string) *subscriber {
	s := &subscriber{client: client, prefix: prefix, pending: map[string]chan struct{}{}}
	s.hub = wait.NewHub(s)
	return s
}

// Subscribe implements wait.Channel: it returns once Redis confirms.
func (s *subscriber) Subscribe(ctx context.Context, key string) error {
	ch := s.prefix + key
	confirmed := make(chan struct{})
	s.mu.Lock()
	if s.ps == nil {
		s.ps = s.client.Subscribe(context.WithoutCancel(ctx))
		s.done = make(chan struct{})
		go s.dispatch(s.ps.ChannelWithSubscriptions(), s.done)
	}
	ps := s.ps
	s.pending[ch] = confirmed
	s.mu.Unlock()
	err := ps.Subscribe(ctx, ch)
	if err == nil {
		select {
		case <-confirmed:
			return nil
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	s.mu.Lock()
	delete(s.pending, ch)
	s.mu.Unlock()
	_ = ps.Unsubscribe(context.WithoutCancel(ctx), ch) // in case it lands later
	return backendErr(ctx, err)
}

// Unsubscribe implements wait.Channel.
func (s *subscriber) Unsubscribe(key string) {
	s.mu.Lock()
	ps := s.ps
	s.mu.Unlock()
	if ps != nil {
		_ = ps.Unsubscribe(context.Background(), s.prefix+key)
	}
}

// dispatch turns messages into wake-ups. A confirmation nobody waits for
// is go-redis resubscribing after a reconnect, during which a release may
// have been missed: its waiters are woken to look again.
func (s *subscriber) dispatch(msgs <-chan any, done chan struct{}) {
	defer close(done)
	for m := range msgs {
		switch m := m.(type) {
		case *goredis.Message: // a waiter's turn has come
			s.hub.Notify(strings.TrimPrefix(m.Channel, s.prefix))
		case *goredis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			s.mu.Lock()
			c, ok := s.pending[m.Channel]
			delete(s.pending, m.Channel)
			s.mu.Unlock()
			if ok {
				close(c)
			} else {
				s.hub.Notify(strings.TrimPrefix(m.Channel, s.prefix))
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
