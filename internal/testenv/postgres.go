package testenv

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/locker-go/locker/internal/servers"
)

// PostgresServer is a postgres cluster of a fault test's own (initdb in a
// temporary directory, a free loopback port), so that killing it disturbs
// no other test. Its data survives Restart, as a crashed server's would.
type PostgresServer struct {
	process
	port int
}

// StartPostgres makes and starts a cluster; t's cleanup kills it.
func StartPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "locker-pg-") // not t.TempDir: the postgres user must reach it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// A commit acknowledged must survive the SIGKILL of Restart, as the
	// tests assume: synchronous_commit=off would lose the last ones, still
	// in shared memory (fsync=off loses nothing a kill can).
	srv := servers.Postgres{Dir: dir, Port: freePort(t), HostAuth: "trust", // no Unix socket
		Extra: []string{"-c", "synchronous_commit=on"}}
	if err := srv.Init(); err != nil {
		t.Fatal(err)
	}
	// After a SIGKILL the old server's backends may still hold its shared
	// memory for a moment, and the new postmaster then refuses to start:
	// it is started again (retry) until one answers.
	s := &PostgresServer{port: srv.Port}
	s.process = process{t: t, name: "postgres " + servers.Addr(srv.Port), command: srv.Cmd,
		answers: servers.PostgresAnswers(s.URL()), within: 30 * time.Second, retry: true}
	t.Cleanup(s.Kill)
	s.start()
	return s
}

// URL is the cluster's, as its superuser (trust auth on loopback).
func (s *PostgresServer) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Restart kills the server and starts it again on its data and port: it
// recovers from its write-ahead log as after a crash.
func (s *PostgresServer) Restart() {
	s.t.Helper()
	s.restart()
}
