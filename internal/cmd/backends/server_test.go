package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sleeper is a server that never answers, run by a shell script whose
// command line shows the test's directory (its title).
func sleeper(t *testing.T, script string) *server {
	dir := t.TempDir()
	return &server{label: "sleeper", log: filepath.Join(dir, "log"), pidFile: filepath.Join(dir, "pid"),
		title: []string{dir}, stopSig: syscall.SIGTERM,
		prepare: func() (*exec.Cmd, error) { return exec.Command("sh", "-c", script, dir), nil },
		answers: func(context.Context) error { return errors.New("never answers") }}
}

func TestServerStartsDetachedAndStops(t *testing.T) {
	s := sleeper(t, "while :; do sleep 0.1; done")
	exited, err := s.start()
	if err != nil || exited == nil {
		t.Fatalf("start: %v (exited %v)", err, exited)
	}
	pid, ok := s.pid()
	for deadline := time.Now().Add(10 * time.Second); !ok; pid, ok = s.pid() { // until the child has exec'd
		if time.Now().After(deadline) {
			t.Fatal("the pid recorded is not alive and ours")
		}
		time.Sleep(time.Millisecond)
	}
	if sid, err := unix.Getsid(pid); err != nil || sid != pid {
		t.Errorf("server's session %d (%v), want its own (%d): ^C on our terminal would reach it", sid, err, pid)
	}
	if _, err := s.start(); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.pid(); again != pid {
		t.Errorf("a second start replaced pid %d with %d; want it left alone", pid, again)
	}
	if err := s.stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	<-exited
	if _, err := os.Stat(s.pidFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file after stop: %v, want it removed", err)
	}
}

func TestServerStopsOnlyItsOwn(t *testing.T) {
	s := sleeper(t, "while :; do sleep 0.1; done")
	// A recycled pid: the file names a live process that is not ours (this
	// test's, whose command line does not show the server's directory).
	if err := os.WriteFile(s.pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.pid(); ok {
		t.Fatal("a pid whose command line is not the server's counts as the server")
	}
	if err := s.stop(time.Second); err != nil { // must not signal us
		t.Fatal(err)
	}
}

func TestServerExitingFailsWithItsLog(t *testing.T) {
	s := sleeper(t, "echo first start; exit 1")
	exited, err := s.start()
	if err != nil {
		t.Fatal(err)
	}
	<-exited
	s.prepare = func() (*exec.Cmd, error) { return exec.Command("sh", "-c", "echo boom; exit 1"), nil }
	exited, err = s.start()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = s.await(ctx, s.answers, exited)
	if err == nil || !strings.Contains(err.Error(), "exited before answering") {
		t.Fatalf("await: %v, want the exit reported", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "boom") || strings.Contains(msg, "first start") {
		t.Errorf("await's message shows %q, want this start's log only", msg)
	}
}
