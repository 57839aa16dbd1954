package testenv

import (
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locker-go/locker/internal/servers"
)

// RedisServer is a redis-server process of a fault test's own, so that
// stopping, killing or restarting it disturbs no other test. Unless made by
// StartRedisAOF it keeps nothing on disk: a restart comes back empty.
type RedisServer struct {
	process
	Addr string // 127.0.0.1:port
}

// StartRedis runs redis-server on a free loopback port (on port, if not
// 0) and waits until it answers; t's cleanup kills it.
func StartRedis(t testing.TB, port int) *RedisServer {
	t.Helper()
	s := newRedis(t, port)
	s.start()
	return s
}

// StartRedisAOF is StartRedis on a free port with an append-only file
// fsynced at every write, as a lock server that must survive a crash is
// configured: Restart brings every key back.
func StartRedisAOF(t testing.TB) *RedisServer {
	t.Helper()
	s := newRedis(t, 0, "--appendonly", "yes", "--appendfsync", "always")
	s.start()
	return s
}

// newRedis makes, but does not start, a server in a directory of its own
// with settings extra; t's cleanup kills it.
func newRedis(t testing.TB, port int, extra ...string) *RedisServer {
	t.Helper()
	if port == 0 {
		port = freePort(t)
	}
	srv := servers.Redis{Port: port, Dir: t.TempDir(), Extra: extra}
	s := &RedisServer{Addr: servers.Addr(port), process: process{t: t, name: "redis-server " + servers.Addr(port),
		command: srv.Cmd, answers: srv.Answers, within: 10 * time.Second}}
	t.Cleanup(s.Kill)
	return s
}

// Restart kills the server (SIGKILL) and starts it again on its port:
// empty, or with its data if made by StartRedisAOF.
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.restart()
}

// Port is the server's port, e.g. to start it again on the same one.
func (s *RedisServer) Port() int { return servers.Port(s.Addr) }

func (s *RedisServer) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v to %s: %v", sig, s.name, err)
	}
}

// Stop freezes the server (SIGSTOP): its port still accepts connections
// but nothing answers, the worst case for a client's timeouts.
func (s *RedisServer) Stop() { s.signal(syscall.SIGSTOP) }

// Cont resumes a stopped server.
func (s *RedisServer) Cont() { s.signal(syscall.SIGCONT) }

// RedisCommands is how many commands the reply of INFO commandstats
// counts, scripts' own included: what a server ran, to compare before and
// after a step. INFO's are left out, and those of the commands in skip
// (as INFO names them: "pexpire").
func RedisCommands(info string, skip ...string) int64 {
	var total int64
	for _, line := range strings.Split(info, "\n") {
		stat, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(stat, "cmdstat_")
		if !ok || !isCmd || name == "info" || slices.Contains(skip, name) {
			continue
		}
		for _, f := range strings.Split(fields, ",") {
			if n, ok := strings.CutPrefix(f, "calls="); ok {
				v, _ := strconv.ParseInt(n, 10, 64)
				total += v
			}
		}
	}
	return total
}
