package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresServer is a postgres cluster of a fault test's own (initdb in a
// temporary directory, a free loopback port), so that killing it disturbs
// no other test. Its data survives Restart, as a crashed server's would.
type PostgresServer struct {
	process
	bin  string // the directory of initdb and postgres
	data string
	port int
	cred *syscall.Credential // the postgres OS user's, when we are root
}

// StartPostgres makes and starts a cluster; t's cleanup kills it.
func StartPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(bins, func(a, b string) int { return pgMajor(a) - pgMajor(b) })
	if len(bins) == 0 {
		t.Fatal("PostgreSQL server binaries not found under /usr/lib/postgresql (scripts/backends up installs them)")
	}
	s := &PostgresServer{process: process{t: t, name: "postgres"}, bin: filepath.Dir(bins[len(bins)-1]), port: freePort(t)}
	dir, err := os.MkdirTemp("", "locker-pg-") // not t.TempDir: the postgres user must reach it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s.data = filepath.Join(dir, "data")
	if os.Geteuid() == 0 { // postgres refuses to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("no postgres OS user (scripts/backends up installs postgresql): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := s.command("initdb", "-D", s.data, "-U", "postgres", "-N", "--auth=trust",
		"--encoding=UTF8", "--locale=C").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	s.start()
	t.Cleanup(s.Kill)
	return s
}

func pgMajor(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// URL is the cluster's, as its superuser (trust auth on loopback).
func (s *PostgresServer) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

func (s *PostgresServer) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = "/"
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd
}

// start runs the postmaster and waits until it accepts connections. After
// a SIGKILL the old server's backends may still hold its shared memory for
// a moment, and the new postmaster then refuses to start: it is started
// again until one answers.
func (s *PostgresServer) start() {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		exit := s.spawn(s.command("postgres", "-D", s.data, "-p", strconv.Itoa(s.port), "-c", "listen_addresses=127.0.0.1",
			"-c", "unix_socket_directories=", "-c", "fsync=off", "-c", "max_connections=100"))
		if s.await(exit, deadline) {
			return
		}
	}
	s.Kill()
	s.t.Fatalf("postgres on port %d did not answer within 30s", s.port)
}

// await reports whether the server answers before it exits or deadline.
func (s *PostgresServer) await(exit <-chan struct{}, deadline time.Time) bool {
	for time.Now().Before(deadline) {
		if s.answers() {
			return true
		}
		select {
		case <-exit:
			return false
		case <-time.After(20 * time.Millisecond): // a server starting up offers nothing to wait on
		}
	}
	return false
}

func (s *PostgresServer) answers() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		return false
	}
	defer c.Close(ctx)
	return c.Ping(ctx) == nil
}

// Restart kills the server and starts it again on its data and port: it
// recovers from its write-ahead log as after a crash.
func (s *PostgresServer) Restart() { s.restart(s.start) }

// freePort is a loopback port nobody listened on a moment ago.
func freePort(t testing.TB) int {
	_, p, _ := net.SplitHostPort(freeAddr(t))
	n, _ := strconv.Atoi(p)
	return n
}
