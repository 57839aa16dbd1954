package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locker-go/locker/internal/servers"
)

// poll is how often a starting server is asked whether it answers: it
// offers nothing to wait on.
const poll = 20 * time.Millisecond

// process is a server process of a test's own: started, killed as a crash
// would, and started again on its data. What it runs and how it answers
// come from internal/servers.
type process struct {
	t       testing.TB
	name    string                    // for failures, e.g. "redis-server 127.0.0.1:20001"
	command func() (*exec.Cmd, error) // made afresh for each start: it may write the server's files
	answers servers.Check             // nil when the server answers
	within  time.Duration             // how long it may take to answer
	retry   bool                      // started again when it exits before answering
	log     string                    // its log file, shown when it fails to start; "" for none
	cmd     *exec.Cmd
	exit    chan struct{} // closed when cmd has exited
}

// spawn starts the server without waiting for it.
func (p *process) spawn() {
	p.t.Helper()
	cmd, err := p.command()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
	exit := make(chan struct{})
	p.cmd, p.exit = cmd, exit
	go func() { _ = cmd.Wait(); close(exit) }()
}

// await waits until the spawned server answers; if it exits first or does
// not answer within p.within, t fails with the reason and the server's log.
// With p.retry an exited server is started again meanwhile.
func (p *process) await() {
	p.t.Helper()
	ctx, cancel := context.WithTimeoutCause(context.Background(), p.within, fmt.Errorf("no answer within %v", p.within))
	defer cancel()
	for {
		err := servers.Await(ctx, p.answers, p.exit, poll)
		if err == nil {
			return
		}
		if !p.retry || ctx.Err() != nil {
			p.Kill()
			p.t.Fatalf("%s: %v%s", p.name, err, p.logText())
		}
		p.spawn()
	}
}

// start runs the server and waits until it answers.
func (p *process) start() {
	p.t.Helper()
	p.spawn()
	p.await()
}

func (p *process) logText() string {
	if p.log == "" {
		return ""
	}
	b, err := os.ReadFile(p.log)
	if err != nil {
		return fmt.Sprintf("\n(its log: %v)", err)
	}
	return "\nits log " + p.log + ":\n" + string(b)
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it;
// safe to call twice.
func (p *process) Kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exit
}

// restart kills the server and starts it again, waiting until it answers.
func (p *process) restart() {
	p.t.Helper()
	old, began := p.cmd.Process.Pid, time.Now()
	p.Kill()
	p.start()
	p.t.Logf("%s pid %d killed; pid %d answers %v later", p.name, old, p.cmd.Process.Pid, time.Since(began).Round(time.Millisecond))
}

// ensemble is servers that serve together, such as a quorum: a server
// alone may never answer, so all are started before any is waited for.
type ensemble []*process

// Kill ends server i at once (SIGKILL); safe to call twice.
func (e ensemble) Kill(i int) { e[i].Kill() }

func (e ensemble) killAll() {
	for _, p := range e {
		p.Kill()
	}
}

func (e ensemble) startAll() {
	for _, p := range e {
		p.t.Helper()
		p.spawn()
	}
	for _, p := range e {
		p.t.Helper()
		p.await()
	}
}

// Restart kills every server at once (SIGKILL) and starts them all again
// with their data, as after a power cut, and waits until each answers.
func (e ensemble) Restart() {
	e[0].t.Helper()
	e.killAll()
	e.startAll()
}

// freePort returns a loopback port that was free a moment ago, below the
// ephemeral range (and above the ports of scripts/backends, but for its
// Redis Cluster's bus ports, 27001–27003, taken and so passed over): a server
// killed and started again on it must not find it taken meanwhile by some
// client's outgoing connection, as an etcd member's once was. It never
// returns a port twice: an ensemble's members, asked for their ports
// before any listens, once got the same one for a client and a peer port.
func freePort(t testing.TB) int {
	t.Helper()
	const lo = 20000
	hi := ephemeralLow()
	handed.Lock()
	defer handed.Unlock()
	for range 1000 {
		p := lo + rand.IntN(hi-lo)
		if handed.ports[p] {
			continue
		}
		if ln, err := net.Listen("tcp", servers.Addr(p)); err == nil {
			ln.Close()
			handed.ports[p] = true
			return p
		}
	}
	t.Fatalf("no free loopback port in %d-%d", lo, hi-1)
	return 0
}

// handed are the ports freePort returned.
var handed = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if f := strings.Fields(string(b)); err == nil && len(f) == 2 {
		if n, err := strconv.Atoi(f[0]); err == nil && n > 20100 {
			return n
		}
	}
	return 32768
}
