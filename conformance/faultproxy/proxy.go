// Package faultproxy makes a client vanish from the network as a killed
// process would: no unlock, no close-session, just silence. A test gives
// each client of the backend a loopback [Proxy] to dial instead of the
// server, and cuts it to "crash" the client.
//
// [Crasher] packages this for a [conformance.Harness]: its Proxy starts the
// proxies, Track records whose they are, and its Crash method is the
// harness's Crash. A third-party adapter's conformance test runs the crash
// checks with it:
//
//	var crasher faultproxy.Crasher
//	t.Cleanup(func() { _ = crasher.Close() })
//	h := conformance.Harness{
//		NewLocker: func(ctx context.Context) (locker.Locker, error) {
//			p, err := crasher.Proxy("127.0.0.1:6379")
//			if err != nil {
//				return nil, err
//			}
//			l, err := myadapter.Dial(ctx, p.Addr()) // the client dials the proxy
//			if err != nil {
//				return nil, err
//			}
//			crasher.Track(l, p)
//			return l, nil
//		},
//		Crash: crasher.Crash,
//	}
//
// [conformance.Harness]: https://pkg.go.dev/github.com/locker-go/locker/conformance#Harness
package faultproxy

import (
	"net"
	"sync"
	"time"
)

// Proxy forwards connections from its own loopback address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    bool
	paused chan struct{} // non-nil while blackholed; closed by Resume
	delay  time.Duration // added to every chunk forwarded
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// New starts a proxy on 127.0.0.1 to target (host:port).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's host:port, to give the client instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut drops every connection and refuses new ones, for good.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
}

// Drop closes every connection and goes on accepting new ones, as a
// network blip or a load balancer's idle timeout does: clients reconnect.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Blackhole stops forwarding in both directions while keeping every
// connection open, as a network that drops packets does: the client's
// calls hang without an error until Resume (or their own timeouts).
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused == nil {
		p.paused = make(chan struct{})
	}
}

// Resume forwards again what was held back, as TCP retransmits once the
// network heals.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused != nil {
		close(p.paused)
		p.paused = nil
	}
}

// Delay holds every chunk back by d before forwarding it, in both
// directions, so a round trip takes 2d longer: a slow network. Delay(0)
// ends it.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// gate waits while the proxy is blackholed, then for its delay.
func (p *Proxy) gate() {
	p.mu.Lock()
	paused := p.paused
	p.mu.Unlock()
	if paused != nil {
		<-paused
	}
	p.mu.Lock()
	d := p.delay
	p.mu.Unlock()
	if d > 0 {
		time.Sleep(d) // the latency itself
	}
}

// Close cuts the proxy and waits for its goroutines.
func (p *Proxy) Close() error {
	p.Cut()
	p.Resume() // let held-back pipes see their closed connections
	p.wg.Wait()
	return nil
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, u) {
			continue
		}
		p.wg.Add(2)
		go p.pipe(c, u)
		go p.pipe(u, c)
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.gate()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil { // an error from either side just ends the pair
			break
		}
	}
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
