package testenv

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/locker-go/locker/internal/servers"
)

// MariaDBServer is a mariadbd of a fault test's own (its data in a
// temporary directory, a free loopback port), so that killing it disturbs
// no other test. It runs without grant tables: any user may connect. Its
// data survives Restart, as a crashed server's would (every commit is
// written to the log at once: innodb_flush_log_at_trx_commit=1).
type MariaDBServer struct {
	process
	port int
}

// StartMariaDB makes and starts a server with an empty database locker;
// t's cleanup kills it.
func StartMariaDB(t testing.TB) *MariaDBServer {
	t.Helper()
	// Later options win in mariadbd: these override servers.MariaDB's.
	srv := servers.MariaDB{Dir: t.TempDir(), Port: freePort(t), Extra: []string{"--skip-grant-tables",
		"--innodb-flush-log-at-trx-commit=1", "--innodb-buffer-pool-size=32M"}}
	if err := srv.Init(); err != nil {
		t.Fatal(err)
	}
	dsn := fmt.Sprintf("root@tcp(%s)/?timeout=1s", servers.Addr(srv.Port))
	s := &MariaDBServer{port: srv.Port, process: process{t: t, name: "mariadbd " + servers.Addr(srv.Port),
		command: srv.Cmd, answers: servers.MariaDBAnswers(dsn), within: 30 * time.Second, log: srv.Log()}}
	t.Cleanup(s.Kill)
	s.start()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE locker"); err != nil {
		t.Fatal(err)
	}
	return s
}

// URL is the server's database locker.
func (s *MariaDBServer) URL() string {
	return fmt.Sprintf("mysql://root@127.0.0.1:%d/locker", s.port)
}

// Restart kills the server and starts it again on its data and port: it
// recovers from its redo log as after a crash.
func (s *MariaDBServer) Restart() {
	s.t.Helper()
	s.restart()
}
