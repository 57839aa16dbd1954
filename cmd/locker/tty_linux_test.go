package main

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// At a terminal, CMD gets the terminal's foreground: it can read it, and
// Ctrl-C goes to CMD alone; locker then sees CMD end and unlocks.
func TestRunAtTerminalCtrlC(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	cmd, master, out, done := startAtTerminal(t, env, "run", key, "--", "sh", "-c", `echo ready; read line; echo "read:$line"; exec sleep 60`)
	out.waitFor(t, "ready")
	if _, err := master.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	// A background process group would be stopped reading the terminal.
	out.waitFor(t, "read:hello")
	if _, err := master.Write([]byte{3}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("locker still running after Ctrl-C; terminal: %q", out.text())
	}
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGINT) {
		t.Errorf("exit %d after Ctrl-C, want 130; terminal: %q", code, out.text())
	}
	cli(t, env, "status", key).want(t, exitFail, "status after Ctrl-C")
}

func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, slave
}

// screen collects what the terminal shows.
type screen struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newScreen(master *os.File) *screen {
	s := &screen{changed: make(chan struct{}, 1)}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			s.mu.Lock()
			s.buf.Write(b[:n])
			s.mu.Unlock()
			select {
			case s.changed <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	return s
}

func (s *screen) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *screen) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(s.text(), want) {
		select {
		case <-s.changed:
		case <-deadline:
			t.Fatalf("terminal never showed %q: %q", want, s.text())
		}
	}
}

// startAtTerminal starts locker with args on a new pseudo-terminal, as a
// shell would at its prompt, and returns the terminal's master side, what
// it shows, and a channel closed when locker exits.
func startAtTerminal(t *testing.T, env []string, args ...string) (*exec.Cmd, *os.File, *screen, <-chan struct{}) {
	t.Helper()
	master, slave := openPTY(t)
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// A session of its own with the pty as controlling terminal, as a shell gives.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd, master, newScreen(master), done
}

// waitStopped waits until process pid is stopped (state T in /proc).
func waitStopped(t *testing.T, pid int, what string, out *screen) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err == nil {
			if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "T" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never stopped; terminal: %q", what, out.text())
		}
		time.Sleep(10 * time.Millisecond) // a process's state offers nothing to wait on
	}
}

// Ctrl-Z during locker run is job control as in a shell: CMD stops,
// locker stops too and hands the terminal back, so the shell gets it; on
// fg (SIGCONT) CMD gets the terminal and goes on, under the same lease.
func TestRunAtTerminalCtrlZ(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	cmd, master, out, done := startAtTerminal(t, env, "run", key, "--", "sh", "-c",
		`echo ready; while read line; do echo "read:$line"; done`)
	out.waitFor(t, "ready")
	for round := range 2 { // and again: each stop is seen once
		if _, err := master.Write([]byte{0x1a}); err != nil { // Ctrl-Z
			t.Fatal(err)
		}
		waitStopped(t, cmd.Process.Pid, "locker", out)
		if fg, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPGRP); err != nil || fg != cmd.Process.Pid {
			t.Errorf("terminal's foreground group %d (%v), want locker's %d: the shell could not take it back", fg, err, cmd.Process.Pid)
		}
		cli(t, env, "status", key).want(t, 0, "status while stopped")
		if err := syscall.Kill(cmd.Process.Pid, syscall.SIGCONT); err != nil { // fg
			t.Fatal(err)
		}
		line := "again" + strconv.Itoa(round)
		if _, err := master.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		out.waitFor(t, "read:"+line) // CMD runs again, and reads the terminal
	}
	if _, err := master.Write([]byte{4}); err != nil { // Ctrl-D: CMD's loop ends
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("locker still running after CMD's input ended; terminal: %q", out.text())
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %d, want 0; terminal: %q", code, out.text())
	}
	cli(t, env, "status", key).want(t, exitFail, "status once CMD ended: released") // held across, released at the end
}

// A lease lost while stopped by Ctrl-Z: on fg, CMD is stopped as on any
// lost lease, and locker exits 70.
func TestRunAtTerminalCtrlZPastTTL(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	cmd, master, out, done := startAtTerminal(t, env, "run", "--ttl", "1s", key, "--", "sh", "-c",
		`echo ready; while read line; do echo "read:$line"; done`)
	out.waitFor(t, "ready")
	if _, err := master.Write([]byte{0x1a}); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, cmd.Process.Pid, "locker", out)
	taker := cli(t, env, "run", key, "--", "true") // waits until the stopped lease lapses
	taker.want(t, 0, "another run once the stopped holder's lease lapsed")
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("locker still running after fg with its lease lost; terminal: %q", out.text())
	}
	if code := cmd.ProcessState.ExitCode(); code != exitLeaseLost {
		t.Errorf("exit %d, want %d; terminal: %q", code, exitLeaseLost, out.text())
	}
	if !strings.Contains(out.text(), "lost the lease") {
		t.Errorf("terminal: %q; want the loss explained", out.text())
	}
}
