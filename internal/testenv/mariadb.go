package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql"
)

// MariaDBServer is a mariadbd of a fault test's own (its data in a
// temporary directory, a free loopback port), so that killing it disturbs
// no other test. It runs without grant tables: any user may connect. Its
// data survives Restart, as a crashed server's would (every commit is
// written to the log at once: innodb_flush_log_at_trx_commit=1).
type MariaDBServer struct {
	process
	dir  string
	port int
}

// StartMariaDB makes and starts a server with an empty database locker;
// t's cleanup kills it.
func StartMariaDB(t testing.TB) *MariaDBServer {
	t.Helper()
	if _, err := exec.LookPath("mariadbd"); err != nil {
		t.Fatalf("mariadbd not found (scripts/backends up installs mariadb-server): %v", err)
	}
	s := &MariaDBServer{process: process{t: t, name: "mariadbd"}, dir: t.TempDir(), port: freePort(t)}
	if out, err := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(s.dir, "data"),
		"--user="+userName(), "--skip-test-db").CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	s.start()
	t.Cleanup(s.Kill)
	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/", s.port))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE locker"); err != nil {
		t.Fatal(err)
	}
	return s
}

func userName() string {
	if os.Geteuid() == 0 {
		return "root" // mariadbd runs as root only when told so
	}
	return strconv.Itoa(os.Geteuid())
}

// URL is the server's database locker.
func (s *MariaDBServer) URL() string {
	return fmt.Sprintf("mysql://root@127.0.0.1:%d/locker", s.port)
}

// start runs mariadbd and waits until it answers.
func (s *MariaDBServer) start() {
	exit := s.spawn(exec.Command("mariadbd", "--no-defaults", "--datadir="+filepath.Join(s.dir, "data"), "--user="+userName(),
		"--bind-address=127.0.0.1", "--port="+strconv.Itoa(s.port), "--socket="+filepath.Join(s.dir, "sock"),
		"--skip-grant-tables", "--skip-name-resolve", "--skip-log-bin", "--innodb-flush-log-at-trx-commit=1",
		"--innodb-buffer-pool-size=32M", "--log-error="+filepath.Join(s.dir, "error.log")))
	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/?timeout=1s", s.port))
	if err != nil {
		s.t.Fatal(err)
	}
	defer db.Close()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-exit:
			log, _ := os.ReadFile(filepath.Join(s.dir, "error.log"))
			s.t.Fatalf("mariadbd exited before answering:\n%s", log)
		case <-time.After(20 * time.Millisecond): // a server starting up offers nothing to wait on
		}
	}
	s.Kill()
	s.t.Fatalf("mariadbd on port %d did not answer within 30s", s.port)
}

// Restart kills the server and starts it again on its data and port: it
// recovers from its redo log as after a crash.
func (s *MariaDBServer) Restart() { s.restart(s.start) }
