package faultproxy

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/locker-go/locker"
)

// Crasher starts the proxies a test's clients dial through and remembers
// whose they are, so that its Crash, a conformance.Harness's Crash, can cut
// a client off. The zero value is ready to use; it is safe for concurrent
// use, as the suite's parallel checks need.
type Crasher struct {
	mu      sync.Mutex
	started []*Proxy                   // every proxy, for Close
	clients map[locker.Locker][]*Proxy // what Track recorded, for Crash
}

// Proxy starts a proxy to target (host:port) for one client to dial instead
// of target. Close stops it with all the others.
func (c *Crasher) Proxy(target string) (*Proxy, error) {
	p, err := New(target)
	if err != nil {
		return nil, fmt.Errorf("faultproxy to %s: %w", target, err)
	}
	c.mu.Lock()
	c.started = append(c.started, p)
	c.mu.Unlock()
	return p, nil
}

// Track records that l reaches its backend through ps (nil ones, of a
// client that dials directly, are ignored).
func (c *Crasher) Track(l locker.Locker, ps ...*Proxy) {
	ps = slices.DeleteFunc(ps, func(p *Proxy) bool { return p == nil })
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clients == nil {
		c.clients = map[locker.Locker][]*Proxy{}
	}
	c.clients[l] = ps
}

// Crash cuts every proxy of l: it vanishes from the network as a killed
// process would, without a word to the backend. It fails for a Locker that
// Track did not record with a proxy, which could not be crashed. The
// context is unused: cutting is immediate.
func (c *Crasher) Crash(_ context.Context, l locker.Locker) error {
	ps, err := c.proxies(l, "Crash")
	if err != nil {
		return err
	}
	for _, p := range ps {
		p.Cut()
	}
	return nil
}

// Blackhole stops l's traffic, connections kept open, until heal: the
// backend seems to hang (a Harness's Hang). It fails for a Locker that
// Track did not record with a proxy.
func (c *Crasher) Blackhole(_ context.Context, l locker.Locker) (heal func(), err error) {
	ps, err := c.proxies(l, "Blackhole")
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		p.Blackhole()
	}
	return func() {
		for _, p := range ps {
			p.Resume()
		}
	}, nil
}

// Delay adds d of latency each way to l's traffic until heal (a
// Harness's Slow). It fails for a Locker that Track did not record with a
// proxy.
func (c *Crasher) Delay(_ context.Context, l locker.Locker, d time.Duration) (heal func(), err error) {
	ps, err := c.proxies(l, "Delay")
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		p.Delay(d)
	}
	return func() {
		for _, p := range ps {
			p.Delay(0)
		}
	}, nil
}

// proxies returns the proxies Track recorded for l.
func (c *Crasher) proxies(l locker.Locker, what string) ([]*Proxy, error) {
	c.mu.Lock()
	ps := c.clients[l]
	c.mu.Unlock()
	if len(ps) == 0 {
		return nil, fmt.Errorf("faultproxy: %s of a Locker that was not tracked with a proxy", what)
	}
	return ps, nil
}

// Close stops every proxy Proxy started and forgets the tracked clients:
// call it when the test ends (t.Cleanup), after the clients are closed.
func (c *Crasher) Close() error {
	c.mu.Lock()
	started := c.started
	c.started, c.clients = nil, nil
	c.mu.Unlock()
	for _, p := range started {
		_ = p.Close() // Close never fails
	}
	return nil
}
