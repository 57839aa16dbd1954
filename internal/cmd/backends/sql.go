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
	dir, err := e.postgresDir()
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
		started: servers.PostgresAnswers(p.SocketDSN()),
	}
	ready := func(ctx context.Context) error {
		if probe(s.answers) == nil {
			return nil
		}
		return p.Bootstrap(ctx, login, login)
	}
	return &backend{name: "postgres", addr: servers.Addr(postgresPort), servers: []*server{s}, ready: ready, err: err}
}

// postgresDir is where the cluster lives: under the state directory, unless
// the postgres OS user (as which it runs when we are root) cannot reach
// that, as under a private home; then under /var/tmp, linked from there.
func (e *env) postgresDir() (string, error) {
	dir := filepath.Join(e.state, "postgres")
	fi, err := os.Lstat(dir)
	linked := err == nil && fi.Mode()&os.ModeSymlink != 0
	if os.Geteuid() == 0 && !linked && !enterable(e.state) {
		alt := fmt.Sprintf("/var/tmp/locker-backends-%d/postgres", crc32.ChecksumIEEE([]byte(e.state)))
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) { // an empty one an earlier try left
			return "", fmt.Errorf("the postgres OS user cannot reach %s: move it away (or make its parents searchable by others): %w", dir, err)
		}
		if err := errors.Join(os.MkdirAll(alt, 0o700), os.Chmod(filepath.Dir(alt), 0o755), os.Symlink(alt, dir)); err != nil {
			return "", fmt.Errorf("the postgres OS user cannot reach %s, nor could its state move to %s: %w", e.state, alt, err)
		}
		logf("the postgres OS user cannot reach %s; postgres's state lives in %s", e.state, alt)
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return real, nil
	}
	return dir, nil
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
		switch _, ours := s.pid(); {
		case probe(answers) == nil && probe(nolane) == nil:
			return nil
		case !ours:
			return fmt.Errorf("the server on %s is not ours, and its users %s and locker_nolane (password nolane-pw, no procedures) do not both log in", servers.Addr(mysqlPort), login)
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
