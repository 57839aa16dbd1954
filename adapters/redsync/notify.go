package redsync

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/backoff"
	"github.com/locker-go/locker/internal/rediskey"
)

// master is one Redis master and the driver's subscription to it: one
// pattern for all of the namespace's release channels (both spaces'),
// made when the Locker first waits and kept until Close (as adapters/redis
// keeps its channel), so a wait costs no round trip and no unsubscribe can
// race a newer subscribe. Releases of keys nobody here waits for are
// dropped.
type master struct {
	client     goredis.UniversalClient
	ps         *goredis.PubSub
	index      int           // its place among the masters
	name       string        // its index among the masters, and address: for the log
	live       bool          // subscribed on the current connection; guarded by redlock.mu
	dropped    bool          // it was live once, then lost; guarded by redlock.mu
	quit, done chan struct{} // closed by Close; when read returns
}

// listen starts every master's subscription, once.
func (d *redlock) listen() {
	d.listening.Do(func() {
		for _, m := range d.masters {
			m.ps = m.client.Subscribe(context.Background()) // dials in read
			m.quit, m.done = make(chan struct{}), make(chan struct{})
			go d.read(m)
		}
	})
}

// read delivers one master's messages. A confirmation after the first is
// go-redis subscribing again after a reconnect; releases may have been
// missed meanwhile, so every waiter looks again.
func (d *redlock) read(m *master) {
	defer close(m.done)
	quit, cancel := backoff.Until(context.Background(), m.quit)
	defer cancel()
	_ = m.ps.PSubscribe(quit, rediskey.MatchPrefix(d.channelPrefix())) // kept for Receive's redial if it failed
	_ = m.ps.Subscribe(quit, d.handChannel())                          // hand-offs to this driver's calls
	pace := backoff.Policy{Min: 10 * time.Millisecond, Max: time.Second}
	for confirmed := false; ; {
		var msg any
		// Master down: go-redis redials on the next Receive, paced here.
		if !backoff.Retry(quit, pace, func(context.Context) bool {
			var err error
			if msg, err = m.ps.Receive(context.Background()); err != nil {
				d.setLive(m, false)
			}
			return err == nil || errors.Is(err, goredis.ErrClosed)
		}) || msg == nil {
			return
		}
		switch msg := msg.(type) {
		case *goredis.Message:
			channel, payload := msg.Channel, msg.Payload
			if channel == d.handChannel() {
				channel, payload = handNews(payload)
			}
			if n, ok := d.nameOfChannel(channel); ok {
				d.watches.signal(n)
				if payload != announcement {
					d.heard(n, payload, m.index)
				}
			}
		case *goredis.Subscription:
			if msg.Kind != "psubscribe" {
				continue // the hand channel's: the pattern's stands for both
			}
			if confirmed {
				d.hub.NotifyAll()
				d.watches.signalAll()
			}
			confirmed = true
			d.setLive(m, true)
		}
	}
}

// heard records a message on n's channel from master i, waking the
// longest waiter of each mode that a release may admit; or, if a copy of
// the release handed the key (or a slot) to a call of this driver, every
// Exclusive (or Limited) waiter of the key: the Hub cannot tell which
// call it is for, and the others find they stand behind it, at no cost to
// the masters.
func (d *redlock) heard(n name, payload string, i int) {
	id, _, _ := strings.Cut(payload, " ")
	for _, m := range modes {
		k := hubKey(n, m)
		notify := func() {
			if (m == driver.Exclusive || m == driver.Limited) && d.news.handedOff(k, id) {
				d.hub.NotifyEvery(k)
			} else {
				d.hub.Notify(k)
			}
		}
		wake, first := d.news.heard(k, payload, i)
		if wake {
			notify()
		}
		if first != "" && !wake {
			time.AfterFunc(releaseSpread, func() {
				if d.news.settle(k, first) {
					notify()
				}
			})
		}
	}
}

// setLive records whether m's subscription is live, waking Subscribe;
// a change after the first subscription is logged (after the lock: a
// slow log handler must not hold up the waiters).
func (d *redlock) setLive(m *master, live bool) {
	d.mu.Lock()
	changed := m.live != live
	again := changed && live && m.dropped
	if changed {
		m.live = live
		m.dropped = m.dropped || !live
		close(d.changed)
		d.changed = make(chan struct{})
	}
	d.mu.Unlock()
	switch {
	case changed && !live:
		d.Warn("locker/redsync: a master's subscription was lost; redialling", "master", m.name)
	case again:
		d.Info("locker/redsync: a master's subscription is live again; waiters look again", "master", m.name)
	}
}

// live reports whether a quorum of the subscriptions is live, and a
// channel closed at the next change.
func (d *redlock) live() (bool, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, m := range d.masters {
		if m.live {
			n++
		}
	}
	return n >= d.quorum, d.changed
}

// notifier is the driver's wait.Channel.
type notifier struct{ d *redlock }

// subscribeTimeout bounds the wait for a quorum of live subscriptions.
const subscribeTimeout = time.Second

// Subscribe returns once a quorum of the masters' subscriptions is live:
// every release publishes on a quorum of masters, and two quorums share a
// master, so no release after it returns goes unheard.
func (n notifier) Subscribe(ctx context.Context, key string) error {
	n.d.news.watch(key)
	err := n.d.subscribed(ctx)
	if err != nil {
		n.d.news.forget(key)
	}
	return err
}

// subscribed starts the masters' subscriptions if need be, and returns once
// a quorum of them is live.
func (d *redlock) subscribed(ctx context.Context) error {
	d.listen()
	ctx, cancel := context.WithTimeout(ctx, max(d.cfg.nodeTimeout, subscribeTimeout))
	defer cancel()
	for {
		ok, changed := d.live()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return locker.Unavailable(fmt.Errorf("redlock: fewer than %d of %d masters confirmed the subscription: %w",
				d.quorum, len(d.masters), ctx.Err()))
		}
	}
}

// Unsubscribe forgets what was heard of key: the subscription stays.
func (n notifier) Unsubscribe(key string) { n.d.news.forget(key) }
