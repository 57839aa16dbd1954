package redsync

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

	once sync.Once
	ps   *goredis.PubSub
	mu   sync.Mutex
	// last is, per channel, closed when the last (un)subscribe call sent
	// for it has returned: the next waits for it, so the calls for one
	// channel reach the connection in the order they were made, however
	// late a goroutine runs (a late UNSUBSCRIBE would drop a newer
	// subscription).
	last map[string]chan struct{}
	// expect is, per channel, the confirmations still due, in the order
	// the calls were sent; a SUBSCRIBE's entry holds the chan its
	// confirmation closes, so a late confirmation of an earlier call is
	// never taken for a newer one's.
	expect map[string][]chan struct{}
	// beforeOp, set by a test before first use, runs before each
	// (un)subscribe call, to stand in for a goroutine the scheduler runs late.
	beforeOp func(master int, op, channel string)
	quit     chan struct{} // closed by stop
	done     chan struct{} // closed when read returns
}

// start opens the subscription connection and its reader on first use.
// It reports false once stop has run.
func (m *master) start(l *Locker) bool {
	m.once.Do(func() {
		m.ps = m.client.Subscribe(context.Background())
		m.last = map[string]chan struct{}{}
		m.expect = map[string][]chan struct{}{}
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

// send queues a SUBSCRIBE (confirmed non-nil, closed on its confirmation)
// or an UNSUBSCRIBE of channel behind the calls for it already queued;
// failed receives the error of a call that could not be sent.
func (m *master) send(i int, channel string, confirmed chan struct{}, failed chan<- error) {
	m.mu.Lock()
	prev := m.last[channel]
	mine := make(chan struct{})
	m.last[channel] = mine
	m.mu.Unlock()
	go func() {
		defer func() {
			m.mu.Lock()
			if m.last[channel] == mine {
				delete(m.last, channel)
			}
			m.mu.Unlock()
			close(mine)
		}()
		if prev != nil {
			<-prev
		}
		op, call := "unsubscribe", m.ps.Unsubscribe
		if confirmed != nil {
			op, call = "subscribe", m.ps.Subscribe
		}
		if m.beforeOp != nil {
			m.beforeOp(i, op, channel)
		}
		m.mu.Lock()
		m.expect[channel] = append(m.expect[channel], confirmed)
		m.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
		defer cancel()
		if err := call(ctx, channel); err != nil {
			m.mu.Lock()
			m.expect[channel] = slices.DeleteFunc(m.expect[channel], func(c chan struct{}) bool { return c == confirmed })
			if len(m.expect[channel]) == 0 {
				delete(m.expect, channel)
			}
			m.mu.Unlock()
			if failed != nil {
				failed <- err
			}
		}
	}()
}

// confirm takes the confirmation of kind for channel: it completes the
// oldest call still due. It reports false for one nobody sent, which comes
// from go-redis resubscribing after a reconnect.
func (m *master) confirm(channel, kind string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.expect[channel]
	if len(q) == 0 {
		return false
	}
	if len(q) == 1 {
		delete(m.expect, channel)
	} else {
		m.expect[channel] = q[1:]
	}
	if q[0] != nil && kind == "subscribe" {
		close(q[0])
	}
	return true
}

// read delivers this master's messages: releases wake the key's waiters,
// and SUBSCRIBE confirmations complete notifier.Subscribe. A confirmation
// nobody sent comes from go-redis resubscribing after a reconnect;
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
			// The confirmations due on the lost connection never come.
			// Their callers time out on this master; none is completed
			// by a later, unrelated confirmation.
			m.mu.Lock()
			clear(m.expect)
			m.mu.Unlock()
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
			if msg.Kind != "subscribe" && msg.Kind != "unsubscribe" {
				continue
			}
			if !m.confirm(msg.Channel, msg.Kind) && msg.Kind == "subscribe" {
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
// The other masters' calls go on in the background.
func (n notifier) Subscribe(ctx context.Context, key string) error {
	l := n.l
	channel := l.channel(key)
	for _, m := range l.masters {
		if !m.start(l) {
			return locker.ErrClosed
		}
	}
	ctx, cancel := context.WithTimeout(ctx, max(l.cfg.nodeTimeout, subscribeTimeout))
	defer cancel()
	type reply struct {
		i   int
		err error
	}
	results := make(chan reply, len(l.masters))
	for i, m := range l.masters {
		confirmed, failed := make(chan struct{}), make(chan error, 1)
		m.send(i, channel, confirmed, failed)
		go func() {
			var err error
			select {
			case <-confirmed:
			case err = <-failed:
			case <-ctx.Done():
				err = ctx.Err()
			}
			results <- reply{i, err}
		}()
	}
	ok := 0
	var errs []error
wait:
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
			break wait
		}
	}
	n.Unsubscribe(key)
	return locker.Unavailable(fmt.Errorf("redlock: %d of %d masters confirmed the subscription, %d needed: %w",
		ok, len(l.masters), l.quorum, errors.Join(errs...)))
}

// Unsubscribe queues an unsubscribe on every master without waiting: a
// later Subscribe of the key is sent after it on each master all the same.
func (n notifier) Unsubscribe(key string) {
	l := n.l
	defer l.news.forget(key)
	channel := l.channel(key)
	for i, m := range l.masters {
		if m.start(l) {
			m.send(i, channel, nil, nil)
		}
	}
}
