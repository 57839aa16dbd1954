package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/locker-go/locker/internal/servers"
)

// A server is one process of a backend that this command starts and stops.
type server struct {
	label   string // e.g. "redis 127.0.0.1:16379"
	log     string // its output, each start marked with a "===== " line
	pidFile string
	ownPid  bool     // the server writes pidFile itself
	title   []string // its command line shows one of these: ours, not a recycled pid
	stopSig syscall.Signal
	prepare func() (*exec.Cmd, error) // makes its files, returns its command
	answers servers.Check             // it serves the tests
	started servers.Check             // the one we started answers (when it differs from answers)
}

// pid is the pid recorded for the server, if it is alive and ours.
func (s *server) pid() (int, bool) {
	b, err := os.ReadFile(s.pidFile)
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, alive(pid, s.title)
}

// alive: the process exists, has not exited (a zombie is gone), and its
// command line shows one of title.
func alive(pid int, title []string) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	shown := string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
	for _, t := range title {
		if strings.Contains(shown, t) {
			return true
		}
	}
	return false
}

// start starts the server, detached in a session of its own (it outlives
// this command; ^C on the caller's terminal does not reach it), unless it
// answers or is starting already. It returns a channel closed when the
// process it started exits, or nil.
func (s *server) start() (<-chan struct{}, error) {
	if probe(s.answers) == nil {
		return nil, nil
	}
	if _, ok := s.pid(); ok {
		return nil, nil // starting; waiting will see it answer
	}
	cmd, err := s.prepare()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.label, err)
	}
	out, err := os.OpenFile(s.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	fmt.Fprintf(out, "\n===== %s starting: %s\n", time.Now().Format(time.DateTime), strings.Join(cmd.Args, " "))
	cmd.Stdout, cmd.Stderr = out, out
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	if !s.ownPid {
		_ = os.Remove(s.pidFile)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", s.label, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	if !s.ownPid {
		if err := os.WriteFile(s.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
			_ = cmd.Process.Kill() // a server down could not stop
			return nil, err
		}
	}
	return exited, nil
}

// await waits until check passes, failing with the log's last start if the
// server exits first or does not answer in time.
func (s *server) await(ctx context.Context, check servers.Check, exited <-chan struct{}) error {
	if exited == nil { // started before this command: watch its pid
		exited = s.watch(ctx)
	}
	if err := servers.Await(ctx, check, exited, 200*time.Millisecond); err != nil {
		return fmt.Errorf("%s: %w\n%s", s.label, err, tail(s.log, 40))
	}
	return nil
}

// watch returns a channel closed once the server's recorded pid is not alive.
func (s *server) watch(ctx context.Context) <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		for {
			if _, ok := s.pid(); !ok {
				close(gone)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return gone
}

// stop signals the server, if it is ours and alive, and waits until it has
// exited: SIGKILL if it has not within timeout.
func (s *server) stop(timeout time.Duration) error {
	pid, ok := s.pid()
	if !ok {
		return nil
	}
	_ = syscall.Kill(pid, s.stopSig)
	for _, sig := range []syscall.Signal{0, syscall.SIGKILL} {
		if sig != 0 {
			logf("%s (pid %d) did not exit within %v of %v; sending SIGKILL", s.label, pid, timeout, s.stopSig)
			_ = syscall.Kill(pid, sig)
		}
		for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if !alive(pid, s.title) {
				logf("%s stopped (pid %d)", s.label, pid)
				if !s.ownPid {
					_ = os.Remove(s.pidFile)
				}
				return nil
			}
		}
	}
	return fmt.Errorf("%s (pid %d) would not die", s.label, pid)
}

// tail is the end of what the log's last start wrote.
func tail(log string, n int) string {
	b, err := os.ReadFile(log)
	if err != nil || len(b) == 0 {
		return fmt.Sprintf("(log %s is empty or missing)", log)
	}
	if i := bytes.LastIndex(b, []byte("\n===== ")); i >= 0 {
		b = b[i+1:]
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("----- last lines of %s (this start) -----\n%s\n-----", log, strings.Join(lines, "\n"))
}
