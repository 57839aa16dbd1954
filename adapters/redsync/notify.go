package redsync

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
)

// master is one Redis master and this Locker's subscription connection to it.
type master struct {
	client goredis.UniversalClient

	once    sync.Once
	ps      *goredis.PubSub
	mu      sync.Mutex
	pending map[string]chan struct{} // channel -> closed on SUBSCRIBE's confirmation
	quit    chan struct{}            // closed by stop
	done    chan struct{}            // closed when read returns
}

// start opens the subscription connection and its reader on first use.
// It reports false once stop has run.
func (m *master) start(l *Locker) bool {
	m.once.Do(func() {
		m.ps = m.client.Subscribe(context.Background())
		m.pending = map[string]chan struct{}{}
		m.quit = make(chan struct{})
		m.done = make(chan struct{})
		go m.read(l)
	})
	return m.ps != nil
}

// stop closes the subscription connection, if it was opened.
func (m *master) stop() {
	m.once.Do(func() {}) // no reader may start after this
	if m.ps != nil {
		close(m.quit)
		_ = m.ps.Close()
		<-m.done
	}
}

// read delivers this master's messages: releases wake the key's waiters,
// and SUBSCRIBE confirmations complete notifier.Subscribe. A confirmation
// nobody waits for comes from go-redis resubscribing after a reconnect;
// releases may have been missed meanwhile, so the key's waiters re-try.
func (m *master) read(l *Locker) {
	defer close(m.done)
	prefix := l.channel("")
	backoff := 10 * time.Millisecond
	for {
		msg, err := m.ps.Receive(context.Background())
		if errors.Is(err, goredis.ErrClosed) {
			return
		}
		if err != nil { // master down: go-redis redials on the next Receive
			select {
			case <-time.After(backoff):
			case <-m.quit:
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 10 * time.Millisecond
		switch msg := msg.(type) {
		case *goredis.Message:
			if key := strings.TrimPrefix(msg.Channel, prefix); l.news.heard(key, msg.Payload) {
				l.hub.Notify(key)
			}
		case *goredis.Subscription:
			if msg.Kind != "subscribe" {
				continue
			}
			m.mu.Lock()
			c, ok := m.pending[msg.Channel]
			delete(m.pending, msg.Channel)
			m.mu.Unlock()
			if ok {
				close(c)
			} else {
				l.hub.Notify(strings.TrimPrefix(msg.Channel, prefix))
			}
		}
	}
}

// notifier is the wait.Channel of a Locker: one key's release channel on
// every master.
type notifier struct{ l *Locker }

// subscribeTimeout bounds the wait for a quorum of SUBSCRIBE
// confirmations; a first subscription also dials the connection.
const subscribeTimeout = time.Second

// Subscribe subscribes on every master and returns once a quorum has
// confirmed: every release publishes on a quorum of masters, and two
// quorums share a master, so no release after it returns goes unheard.
// Late confirmations are consumed quietly.
func (n notifier) Subscribe(ctx context.Context, key string) error {
	l := n.l
	channel := l.channel(key)
	confirmed := make([]chan struct{}, len(l.masters))
	for i, m := range l.masters {
		if !m.start(l) {
			return locker.ErrClosed
		}
		confirmed[i] = make(chan struct{})
		m.mu.Lock()
		m.pending[channel] = confirmed[i]
		m.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(ctx, max(l.cfg.nodeTimeout, subscribeTimeout))
	defer cancel()
	type reply struct {
		i   int
		err error
	}
	results := make(chan reply, len(l.masters))
	for i, m := range l.masters {
		go func() {
			err := m.ps.Subscribe(ctx, channel)
			if err == nil {
				select {
				case <-confirmed[i]:
				case <-ctx.Done():
					err = ctx.Err()
				}
			}
			results <- reply{i, err}
		}()
	}
	ok := 0
	var errs []error
	for len(errs) <= len(l.masters)-l.quorum {
		select {
		case r := <-results:
			if r.err != nil {
				errs = append(errs, &redsync.RedisError{Node: r.i, Err: r.err})
				continue
			}
			if ok++; ok >= l.quorum {
				return nil
			}
		case <-ctx.Done():
			errs = append(errs, ctx.Err())
			n.Unsubscribe(key)
			return locker.Unavailable(fmt.Errorf("redlock: %d of %d masters confirmed the subscription, %d needed: %w",
				ok, len(l.masters), l.quorum, errors.Join(errs...)))
		}
	}
	n.Unsubscribe(key)
	return locker.Unavailable(fmt.Errorf("redlock: %d of %d masters confirmed the subscription, %d needed: %w",
		ok, len(l.masters), l.quorum, errors.Join(errs...)))
}

// Unsubscribe unsubscribes on every master, waiting at most the node
// timeout, so that a later Subscribe of the key follows it in order.
func (n notifier) Unsubscribe(key string) {
	l := n.l
	defer l.news.forget(key)
	channel := l.channel(key)
	each(context.Background(), l, l.cfg.nodeTimeout, func(ctx context.Context, i int, _ goredis.UniversalClient) (struct{}, error) {
		if !l.masters[i].start(l) {
			return struct{}{}, locker.ErrClosed
		}
		m := l.masters[i]
		m.mu.Lock()
		delete(m.pending, channel)
		m.mu.Unlock()
		return struct{}{}, m.ps.Unsubscribe(ctx, channel)
	})
}
