package faultproxy

import (
	"slices"
	"sync"
	"testing"

	"github.com/locker-go/locker"
)

// Crasher starts the proxies a test's clients dial through and remembers
// whose they are, so that Crash, a conformance.Harness's Crash, can cut a
// client off. The zero value is ready to use.
type Crasher struct {
	clients sync.Map // locker.Locker -> []*Proxy
}

// Proxy starts a proxy to target that closes when t ends.
func (c *Crasher) Proxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatalf("faultproxy to %s: %v", target, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Track records that l reaches its backend through ps (nil ones, of a
// client that dials directly, are ignored).
func (c *Crasher) Track(l locker.Locker, ps ...*Proxy) {
	ps = slices.DeleteFunc(ps, func(p *Proxy) bool { return p == nil })
	c.clients.Store(l, ps)
}

// Crash cuts every proxy of l: it vanishes from the network as a killed
// process would, without a word to the backend.
func (c *Crasher) Crash(t testing.TB, l locker.Locker) {
	t.Helper()
	ps, ok := c.clients.Load(l)
	if !ok || len(ps.([]*Proxy)) == 0 {
		t.Fatal("faultproxy: Crash of a Locker that was not tracked")
	}
	for _, p := range ps.([]*Proxy) {
		p.Cut()
	}
}
