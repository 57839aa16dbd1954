package testenv

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server process of a fault test's own, so that
// stopping, killing or restarting it disturbs no other test. Unless made by
// StartRedisAOF it keeps nothing on disk: a restart comes back empty.
type RedisServer struct {
	t    testing.TB
	Addr string // 127.0.0.1:port
	args []string
	cmd  *exec.Cmd
}

// StartRedis runs redis-server on a free loopback port (on port, if not
// 0) and waits until it answers; t's cleanup kills it.
func StartRedis(t testing.TB, port int) *RedisServer {
	t.Helper()
	return startRedis(t, port, "--save", "", "--appendonly", "no")
}

// StartRedisAOF is StartRedis on a free port with an append-only file
// fsynced at every write, as a lock server that must survive a crash is
// configured: Restart brings every key back.
func StartRedisAOF(t testing.TB) *RedisServer {
	t.Helper()
	return startRedis(t, 0, "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir", t.TempDir())
}

func startRedis(t testing.TB, port int, args ...string) *RedisServer {
	t.Helper()
	if port == 0 {
		port = freePort(t)
	}
	s := &RedisServer{t: t, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		args: append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--daemonize", "no", "--loglevel", "warning"}, args...)}
	s.start()
	t.Cleanup(s.Kill)
	return s
}

// start runs the server and waits until it answers.
func (s *RedisServer) start() {
	s.t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		s.t.Fatalf("redis-server not found (scripts/backends up installs it): %v", err)
	}
	s.cmd = exec.Command(bin, s.args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer within 10s", s.Addr)
		}
		time.Sleep(10 * time.Millisecond) // a process starting up offers nothing to wait on
	}
}

// Restart kills the server (SIGKILL) and starts it again on its port:
// empty, or with its data if made by StartRedisAOF.
func (s *RedisServer) Restart() {
	s.Kill()
	s.start()
}

// Port is the server's port, e.g. to start it again on the same one.
func (s *RedisServer) Port() int {
	_, p, _ := net.SplitHostPort(s.Addr)
	n, _ := strconv.Atoi(p)
	return n
}

func (s *RedisServer) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v to redis-server %s: %v", sig, s.Addr, err)
	}
}

// Stop freezes the server (SIGSTOP): its port still accepts connections
// but nothing answers, the worst case for a client's timeouts.
func (s *RedisServer) Stop() { s.signal(syscall.SIGSTOP) }

// Cont resumes a stopped server.
func (s *RedisServer) Cont() { s.signal(syscall.SIGCONT) }

// Kill ends the server for good (SIGKILL); safe to call twice.
func (s *RedisServer) Kill() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}
