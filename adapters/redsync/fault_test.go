package redsync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// server is a redis-server process of a fault test's own, so that stopping
// it disturbs no other test.
type server struct {
	t    testing.TB
	addr string
	cmd  *exec.Cmd
}

// startServer runs redis-server on a free loopback port (on port, if not 0)
// and waits until it answers; t's cleanup kills it.
func startServer(t testing.TB, port int) *server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found (scripts/backends up installs it): %v", err)
	}
	if port == 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	s := &server{t: t, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	c := goredis.NewClient(&goredis.Options{Addr: s.addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer within 10s", s.addr)
		}
		time.Sleep(10 * time.Millisecond) // a process starting up offers nothing to wait on
	}
	return s
}

func (s *server) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v to redis-server %s: %v", sig, s.addr, err)
	}
}

// stop freezes the server (SIGSTOP): its port still accepts connections
// but nothing answers, the worst case for a client's timeouts.
func (s *server) stop() { s.signal(syscall.SIGSTOP) }

// cont resumes a stopped server.
func (s *server) cont() { s.signal(syscall.SIGCONT) }

// kill ends the server for good; safe to call twice.
func (s *server) kill() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// faultNodeTimeout is the fault tests' per-node timeout: small against the
// TTL as the 50 ms default is, but a healthy master under -race on a small
// shared machine was seen to miss 50 ms, and these tests must not flake.
const faultNodeTimeout = 200 * time.Millisecond

// faultMasters starts five masters and returns them with a Locker over
// them.
func faultMasters(t *testing.T) ([]*server, locker.Locker) {
	t.Helper()
	testenv.URL(t, "LOCKER_TEST_REDLOCK") // -short skips; the same binary serves both
	var servers []*server
	var clients []goredis.UniversalClient
	for range 5 {
		s := startServer(t, 0)
		servers = append(servers, s)
		c := goredis.NewClient(&goredis.Options{Addr: s.addr, ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	l, err := New(clients, WithNodeTimeout(faultNodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return servers, l
}

// lockUnlock checks that l can take key, that nobody else can meanwhile,
// and that it can release it.
func lockUnlock(t *testing.T, l locker.Locker, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatalf("Lock(%q): %v", key, err)
	}
	if _, err := l.TryLock(ctx, key); !errors.Is(err, locker.ErrLocked) {
		t.Errorf("TryLock of a held key = %v, want ErrLocked", err)
	}
	if err := lease.Refresh(ctx); err != nil {
		t.Errorf("Refresh: %v", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock(%q): %v", key, err)
	}
}

// wantUnavailable checks that Lock fails with ErrUnavailable well before
// its ctx deadline, and never returns a lease.
func wantUnavailable(t *testing.T, l locker.Locker, key string) {
	t.Helper()
	const limit = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	lease, err := l.Lock(ctx, key)
	if lease != nil {
		t.Fatalf("Lock with 3 of 5 masters down returned a lease (err %v)", err)
	}
	if !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("Lock with 3 of 5 masters down = %v, want ErrUnavailable", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Lock with 3 of 5 masters down waited out its ctx (%v): %v", limit, err)
	}
	if lease, err := l.TryLock(context.Background(), key); lease != nil || !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("TryLock with 3 of 5 masters down = %v, %v; want ErrUnavailable", lease, err)
	}
}

func TestFaultStoppedMasters(t *testing.T) {
	servers, l := faultMasters(t)
	lockUnlock(t, l, "fault/before")

	servers[0].stop()
	servers[3].stop()
	lockUnlock(t, l, "fault/two-stopped")

	servers[4].stop()
	wantUnavailable(t, l, "fault/three-stopped")

	for _, i := range []int{0, 3, 4} {
		servers[i].cont()
	}
	lockUnlock(t, l, "fault/restored")
	lockUnlock(t, l, "fault/three-stopped") // the failed Locks left nothing behind
}

func TestFaultKilledMasters(t *testing.T) {
	servers, l := faultMasters(t)
	for _, i := range []int{1, 2} {
		servers[i].kill()
	}
	lockUnlock(t, l, "fault/two-killed")

	servers[4].kill()
	wantUnavailable(t, l, "fault/three-killed")

	for _, i := range []int{1, 2, 4} { // back on the same ports, empty
		port, _ := strconv.Atoi(servers[i].addr[len("127.0.0.1:"):])
		servers[i] = startServer(t, port)
	}
	lockUnlock(t, l, "fault/restarted")
}

// A lease whose quorum stops answering ends as lost by its deadline.
func TestFaultLeaseLostWithoutQuorum(t *testing.T) {
	servers, l := faultMasters(t)
	const ttl = time.Second
	lease, err := l.Lock(context.Background(), "fault/lost", locker.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers[:3] {
		s.stop()
	}
	select {
	case <-lease.Done():
	case <-time.After(ttl + 3*time.Second):
		t.Fatalf("lease still live %v after its quorum stopped", ttl+3*time.Second)
	}
	if err := lease.Err(); !errors.Is(err, locker.ErrLeaseLost) {
		t.Errorf("Err = %v, want ErrLeaseLost", err)
	}
	if time.Now().Before(lease.Deadline()) {
		t.Errorf("lease ended before its deadline %v", lease.Deadline())
	}
	for _, s := range servers[:3] {
		s.cont()
	}
}

// A split of 2 stopped masters must not let two clients hold one key.
func TestFaultExclusionWithStoppedMasters(t *testing.T) {
	servers, a := faultMasters(t)
	var clients []goredis.UniversalClient
	for _, s := range servers {
		c := goredis.NewClient(&goredis.Options{Addr: s.addr, ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	b, err := New(clients, WithNodeTimeout(faultNodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	servers[1].stop()
	servers[2].stop()
	defer servers[1].cont()
	defer servers[2].cont()
	for i := range 5 {
		key := fmt.Sprintf("fault/excl/%d", i)
		held, err := a.Lock(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.TryLock(context.Background(), key); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("second client's TryLock = %v while the key is held, want ErrLocked", err)
		}
		if err := held.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
