// Command backends starts, stops and reports the real servers the tests
// use, as local processes bound to loopback on DESIGN.md's fixed ports (the
// same ports docker-compose.yml publishes). scripts/backends runs it:
//
//	scripts/backends up|down|status|restart [backend...]
//
// Missing Debian packages are installed with apt-get. Each server's state
// (data, log, pid file) lives under LOCKER_BACKENDS_DIR (scripts/backends:
// .backends/ in the repository root; else .backends/ here). Nothing that
// matters is kept: Redis keeps nothing, the others run without fsync;
// delete the directory to start empty servers. LOCKER_BACKENDS_TIMEOUT
// bounds each server's start (90 s).
//
// up is idempotent: a server that already answers on its port is left alone,
// whoever started it. down stops only the servers this command started, by
// the pid it recorded, and waits until they have exited. status prints a
// line per backend and exits 0 only when every one named answers (else 3).
//
// How each server is run (its command line, files and readiness) is
// internal/servers', shared with the fault tests' own servers.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	names, err := pick(os.Args[2:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "backends:", err)
		usage()
	}
	e, err := newEnv()
	if err != nil {
		fail(err)
	}
	bs := e.backends(names)
	switch os.Args[1] {
	case "up":
		err = e.locked(func() error { return e.up(bs) })
	case "down":
		err = e.locked(func() error { return e.down(bs) })
	case "restart":
		err = e.locked(func() error {
			if err := e.down(bs); err != nil {
				return err
			}
			return e.up(bs)
		})
	case "status":
		if !e.status(bs) {
			os.Exit(3)
		}
	default:
		usage()
	}
	if err != nil {
		fail(err)
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: scripts/backends up|down|status|restart [backend...]\nbackends: %v (default: all)\n", all)
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "backends: error:", err)
	os.Exit(1)
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "backends: "+format+"\n", args...) }

// all names every backend, in the order they start.
var all = []string{"redis", "redlock", "zookeeper", "etcd", "postgres", "zk-ensemble", "etcd-cluster", "mysql", "redis-cluster"}

func pick(args []string) ([]string, error) {
	for _, a := range args {
		if !slices.Contains(all, a) {
			return nil, fmt.Errorf("unknown backend: %s", a)
		}
	}
	if len(args) == 0 {
		return all, nil
	}
	return args, nil
}

// env is where the servers' state lives and how long one may take to answer.
type env struct {
	state   string
	timeout time.Duration
}

func newEnv() (*env, error) {
	state := os.Getenv("LOCKER_BACKENDS_DIR")
	if state == "" {
		state = ".backends"
	}
	state, err := filepath.Abs(state)
	if err != nil {
		return nil, err
	}
	secs := 90
	if s := os.Getenv("LOCKER_BACKENDS_TIMEOUT"); s != "" {
		if secs, err = strconv.Atoi(s); err != nil || secs <= 0 {
			return nil, fmt.Errorf("LOCKER_BACKENDS_TIMEOUT=%q: want a number of seconds", s)
		}
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		return nil, err
	}
	return &env{state: state, timeout: time.Duration(secs) * time.Second}, nil
}

// within is a context that ends after the time a server may take.
func (e *env) within() (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(context.Background(), e.timeout,
		fmt.Errorf("no answer within %v (LOCKER_BACKENDS_TIMEOUT)", e.timeout))
}
