package main

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/locker-go/locker/internal/servers"
)

// postgres: its own cluster, the tests' login made through its socket.
func (e *env) postgres() *backend {
	dir := e.postgresDir()
	sock := filepath.Join(dir, "run")
	if len(sock) > 90 { // a Unix socket's path is limited to ~107 bytes
		sock = fmt.Sprintf("/tmp/locker-pg-%d", crc32.ChecksumIEEE([]byte(dir)))
	}
	p := servers.Postgres{Dir: dir, Port: postgresPort, SockDir: sock, HostAuth: "scram-sha-256"}
	url := fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", login, login, postgresPort, login)
	s := &server{label: "postgres " + servers.Addr(postgresPort), log: filepath.Join(dir, "postgres.log"),
		pidFile: filepath.Join(p.Data(), "postmaster.pid"), ownPid: true, title: []string{p.Data()},
		stopSig: syscall.SIGINT, // a "fast" shutdown
		prepare: func() (*exec.Cmd, error) {
			if err := p.Init(); err != nil {
				return nil, err
			}
			return p.Cmd()
		},
		answers: servers.PostgresAnswers(url),
		started: servers.PostgresAnswers(fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", sock, postgresPort)),
	}
	ready := func(ctx context.Context) error {
		if s.answers(ctx) == nil {
			return nil
		}
		return p.Bootstrap(ctx, login, login)
	}
	return &backend{name: "postgres", addr: servers.Addr(postgresPort), servers: []*server{s}, ready: ready}
}

// postgresDir is where the cluster lives: under the state directory, unless
// the postgres OS user (as which it runs when we are root) cannot reach
// that, as under a private home; then under /var/tmp, linked from there.
func (e *env) postgresDir() string {
	dir := filepath.Join(e.state, "postgres")
	fi, err := os.Lstat(dir)
	linked := err == nil && fi.Mode()&os.ModeSymlink != 0
	if os.Geteuid() == 0 && !linked && !enterable(e.state) {
		alt := fmt.Sprintf("/var/tmp/locker-backends-%d/postgres", crc32.ChecksumIEEE([]byte(e.state)))
		_ = os.Remove(dir) // an empty one an earlier try left
		if err := errors.Join(os.MkdirAll(alt, 0o700), os.Chmod(filepath.Dir(alt), 0o755), os.Symlink(alt, dir)); err != nil {
			logf("the postgres OS user cannot reach %s, nor could its state move to %s: %v", e.state, alt, err)
		} else {
			logf("the postgres OS user cannot reach %s; postgres's state lives in %s", e.state, alt)
		}
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return real
	}
	return dir
}

// enterable: every directory on dir's path lets others through.
func enterable(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// mysql: MariaDB, its logins made as root through its socket. locker_nolane
// may use the tables but run no procedure of theirs (the SQL adapter's fast
// lane then turns itself off: TestFastLaneNotThisUsers).
func (e *env) mysql() *backend {
	m := servers.MariaDB{Dir: filepath.Join(e.state, "mysql"), Port: mysqlPort}
	dsn := func(user, password string) string {
		return fmt.Sprintf("%s:%s@tcp(127.0.0.1:%d)/%s?timeout=2s", user, password, mysqlPort, login)
	}
	answers, nolane := servers.MariaDBAnswers(dsn(login, login)), servers.MariaDBAnswers(dsn("locker_nolane", "nolane-pw"))
	s := &server{label: "mysql " + servers.Addr(mysqlPort), log: m.Log(), pidFile: filepath.Join(m.Dir, "mariadbd.pid"),
		title: []string{m.Dir}, stopSig: syscall.SIGTERM,
		prepare: func() (*exec.Cmd, error) {
			if err := m.Init(); err != nil {
				return nil, err
			}
			return m.Cmd()
		},
		answers: answers,
		started: func(ctx context.Context) error { return m.Bootstrap(ctx, "SELECT 1") },
	}
	ready := func(ctx context.Context) error {
		if answers(ctx) == nil && nolane(ctx) == nil {
			return nil
		}
		return m.Bootstrap(ctx,
			"CREATE DATABASE IF NOT EXISTS "+login,
			fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s'", login, login),
			fmt.Sprintf("ALTER USER '%s'@'%%' IDENTIFIED BY '%s'", login, login),
			fmt.Sprintf("GRANT ALL ON %s.* TO '%s'@'%%'", login, login),
			"CREATE USER IF NOT EXISTS 'locker_nolane'@'%' IDENTIFIED BY 'nolane-pw'",
			"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX ON "+login+".* TO 'locker_nolane'@'%'")
	}
	return &backend{name: "mysql", addr: servers.Addr(mysqlPort), servers: []*server{s}, ready: ready}
}
