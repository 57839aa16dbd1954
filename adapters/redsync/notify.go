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
	"github.com/locker-go/locker/internal/backoff"
)

// master is one Redis master and the driver's subscription connection to it.
type master struct {
	client goredis.UniversalClient

	once sync.Once
	ps   *goredis.PubSub
	mu   sync.Mutex
	// last is, per channel, closed when the last (un)subscribe call sent
	// for it has returned: the next waits for it, so one channel's calls
	// reach the connection in the order they were made, however late a
	// goroutine runs (a late UNSUBSCRIBE would drop a newer subscription).
	last map[string]chan struct{}
	// expect is, per channel, the calls whose confirmation is due, in the
	// order they were sent, so a late confirmation of an earlier call is
	// never taken for a newer one's.
	expect map[string][]*subCall
	// beforeOp, set by a test before first use, runs before each
	// (un)subscribe call, to stand in for a goroutine the scheduler runs late.
	beforeOp   func(master int, op, channel string)
	quit, done chan struct{} // closed by stop; when read returns
}

// subCall is one (un)subscribe call on one master; a SUBSCRIBE's outcome
// goes to replies.
type subCall struct {
	i       int
	replies chan<- subReply // nil for an UNSUBSCRIBE
}

// subReply is the outcome of master i's SUBSCRIBE: nil once confirmed.
type subReply struct {
	i   int
	err error
}

// start opens the subscription connection and its reader on first use.
// It reports false once stop has run.
func (m *master) start(d *redlock) bool {
	m.once.Do(func() {
		m.ps = m.client.Subscribe(context.Background())
		m.last, m.expect = map[string]chan struct{}{}, map[string][]*subCall{}
		m.quit, m.done = make(chan struct{}), make(chan struct{})
		go m.read(d)
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

// send queues c, a SUBSCRIBE or an UNSUBSCRIBE of channel, behind the
// calls for it already queued.
func (m *master) send(channel string, c *subCall) {
	m.mu.Lock()
	prev, mine := m.last[channel], make(chan struct{})
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
		op, do := "unsubscribe", m.ps.Unsubscribe
		if c.replies != nil {
			op, do = "subscribe", m.ps.Subscribe
		}
		if m.beforeOp != nil {
			m.beforeOp(c.i, op, channel)
		}
		m.mu.Lock()
		m.expect[channel] = append(m.expect[channel], c)
		m.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
		defer cancel()
		if err := do(ctx, channel); err != nil {
			m.settle(channel, c, err)
		}
	}()
}

// settle takes c off the calls due for channel (nil: the oldest, on a
// confirmation) and reports err to its caller. It reports false if no
// call was due, as for the confirmations of go-redis resubscribing after
// a reconnect.
func (m *master) settle(channel string, c *subCall, err error) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.expect[channel]
	i := 0
	if c != nil {
		i = slices.Index(q, c)
	}
	if i < 0 || i >= len(q) {
		return false
	}
	if c = q[i]; len(q) == 1 {
		delete(m.expect, channel)
	} else {
		m.expect[channel] = slices.Delete(q, i, i+1)
	}
	if c.replies != nil {
		c.replies <- subReply{c.i, err}
	}
	return true
}

// read delivers this master's messages: releases wake the key's waiters,
// and SUBSCRIBE confirmations complete notifier.Subscribe. A confirmation
// nobody sent comes from go-redis resubscribing after a reconnect;
// releases may have been missed meanwhile, so the key's waiters re-try.
func (m *master) read(d *redlock) {
	defer close(m.done)
	prefix := d.channel("")
	quit, cancel := backoff.Until(context.Background(), m.quit)
	defer cancel()
	pace := backoff.Policy{Min: 10 * time.Millisecond, Max: time.Second}
	for {
		var msg any
		var err error
		// Master down: go-redis redials on the next Receive, paced here.
		if !backoff.Retry(quit, pace, func(context.Context) bool {
			msg, err = m.ps.Receive(context.Background())
			if err != nil && !errors.Is(err, goredis.ErrClosed) {
				// The confirmations due on the lost connection never
				// come: their callers time out on this master, and none
				// is completed by a later, unrelated confirmation.
				m.mu.Lock()
				clear(m.expect)
				m.mu.Unlock()
				return false
			}
			return true
		}) || errors.Is(err, goredis.ErrClosed) {
			return
		}
		switch msg := msg.(type) {
		case *goredis.Message:
			if key := strings.TrimPrefix(msg.Channel, prefix); d.news.heard(key, msg.Payload) {
				d.hub.Notify(key)
			}
		case *goredis.Subscription:
			var err error // a SUBSCRIBE confirmed as an UNSUBSCRIBE failed
			switch msg.Kind {
			case "unsubscribe":
				err = errors.New("unsubscribe confirmed")
			case "subscribe":
			default:
				continue
			}
			if !m.settle(msg.Channel, nil, err) && err == nil {
				d.hub.Notify(strings.TrimPrefix(msg.Channel, prefix))
			}
		}
	}
}

// notifier is the wait.Channel of a driver: one key's release channel on
// every master.
type notifier struct{ d *redlock }

// subscribeTimeout bounds the wait for a quorum of SUBSCRIBE
// confirmations; a first subscription also dials the connection.
const subscribeTimeout = time.Second

// Subscribe subscribes on every master and returns once a quorum has
// confirmed: every release publishes on a quorum of masters, and two
// quorums share a master, so no release after it returns goes unheard.
// The other masters' calls go on in the background.
func (n notifier) Subscribe(ctx context.Context, key string) error {
	d := n.d
	for _, m := range d.masters {
		if !m.start(d) {
			return locker.ErrClosed
		}
	}
	ctx, cancel := context.WithTimeout(ctx, max(d.cfg.nodeTimeout, subscribeTimeout))
	defer cancel()
	replies := make(chan subReply, len(d.masters)) // one each at most: never blocks
	for i, m := range d.masters {
		m.send(d.channel(key), &subCall{i, replies})
	}
	ok := 0
	var errs []error
	for ok < d.quorum && len(errs) <= len(d.masters)-d.quorum && ctx.Err() == nil {
		select {
		case r := <-replies:
			if r.err == nil {
				ok++
			} else {
				errs = append(errs, &redsync.RedisError{Node: r.i, Err: r.err})
			}
		case <-ctx.Done():
			errs = append(errs, ctx.Err())
		}
	}
	if ok >= d.quorum {
		return nil
	}
	n.Unsubscribe(key)
	return locker.Unavailable(fmt.Errorf("redlock: %d of %d masters confirmed the subscription, %d needed: %w",
		ok, len(d.masters), d.quorum, errors.Join(errs...)))
}

// Unsubscribe queues an unsubscribe on every master without waiting: a
// later Subscribe of the key is sent after it on each master all the same.
func (n notifier) Unsubscribe(key string) {
	d := n.d
	defer d.news.forget(key)
	for i, m := range d.masters {
		if m.start(d) {
			m.send(d.channel(key), &subCall{i: i})
		}
	}
}
