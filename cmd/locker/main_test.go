package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests drive the built binary as separate processes, as a user would.

var bin string // the locker binary, built once by TestMain

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "locker-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "locker")
	args := []string{"build", "-o", bin}
	if raceBuild {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the locker binary:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runID keeps keys of concurrent test runs on a shared backend apart.
var runID = strings.ToLower(rand.Text()[:8])

func uniqueKey(t *testing.T) string {
	return "locker-cli-" + runID + "/" + t.Name()
}

// testEnv is the environment of locker processes in a test: the user's,
// without a LOCKER_BACKEND, and with a state directory of the test's own,
// so the embedded default is a fresh SQLite file.
func testEnv(t *testing.T, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOCKER_BACKEND=") && !strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			env = append(env, kv)
		}
	}
	return append(append(env, "XDG_STATE_HOME="+t.TempDir()), extra...)
}

// result is how one locker process ended.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the binary to its end.
func cli(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("locker %v: %v", args, err)
	}
	return result{cmd.ProcessState.ExitCode(), out.String(), errb.String()}
}

// want fails the test unless r ended with code.
func (r result) want(t *testing.T, code int, what string) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", what, r.code, code, r.stdout, r.stderr)
	}
	return r
}

// proc is a locker process running in the background.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string // its stdout, line by line
	stdin  io.WriteCloser
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan struct{}
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.Write(b)
}

func (p *proc) errText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// start starts the binary; the test ends it if it is still running.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), lines: make(chan string, 100), done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stderr = p
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// line waits for the next line of stdout.
func (p *proc) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			<-p.done
			t.Fatalf("locker ended (exit %d) before printing a line; stderr: %s", p.cmd.ProcessState.ExitCode(), p.errText())
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatalf("no line from locker within 30s; stderr: %s", p.errText())
	}
	return ""
}

// exit waits for the process to end and returns its code.
func (p *proc) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(time.Minute):
		t.Fatalf("locker still running after a minute; stderr: %s", p.errText())
	}
	return 0
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// holder starts `locker run KEY` holding the key until its stdin closes,
// and returns once the command runs under the lock.
func holder(t *testing.T, env []string, key string, flags ...string) *proc {
	t.Helper()
	args := append(append([]string{"run"}, flags...), key, "--", "sh", "-c", `echo "held $LOCKER_FENCE"; read x; exit 0`)
	p := start(t, env, args...)
	if l := p.line(t); !strings.HasPrefix(l, "held ") {
		t.Fatalf("holder printed %q", l)
	}
	return p
}
