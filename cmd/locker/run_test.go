package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestRunPassesEnvAndExitCode(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	script := `echo "$LOCKER_KEY"; echo "$LOCKER_OWNER"; echo "$LOCKER_FENCE"; exit 7`
	var fences []uint64
	for range 2 {
		r := cli(t, env, "run", key, "--", "sh", "-c", script).want(t, 7, "run exiting 7")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 3 || lines[0] != key || lines[1] == "" {
			t.Fatalf("child saw LOCKER_KEY, LOCKER_OWNER, LOCKER_FENCE = %q; want the key, an owner, a fence", lines)
		}
		fence, err := strconv.ParseUint(lines[2], 10, 64)
		if err != nil || fence == 0 {
			t.Fatalf("LOCKER_FENCE = %q", lines[2])
		}
		fences = append(fences, fence)
	}
	if fences[1] <= fences[0] {
		t.Errorf("fence of the second run %d is not above the first's %d", fences[1], fences[0])
	}
	// The key was released each time: nobody holds it now.
	cli(t, env, "status", key).want(t, exitFail, "status after the runs")
}

func TestRunChildKilledBySignal(t *testing.T) {
	t.Parallel()
	r := cli(t, testEnv(t), "run", uniqueKey(t), "--", "sh", "-c", "kill -KILL $$")
	r.want(t, 128+int(syscall.SIGKILL), "run of a command killed by SIGKILL")
}

func TestRunTryAndWaitOnHeldKey(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	h := holder(t, env, key)

	r := cli(t, env, "run", "--try", key, "--", "echo", "ran").want(t, exitTempFail, "--try on a held key")
	if r.stdout != "" || !strings.Contains(r.stderr, "held by another owner") || !strings.Contains(r.stderr, "--try") {
		t.Errorf("--try on a held key: stdout %q, stderr %q; want no run and a message naming --try", r.stdout, r.stderr)
	}
	r = cli(t, env, "run", "--wait", "300ms", key, "--", "echo", "ran").want(t, exitTempFail, "--wait running out")
	if r.stdout != "" || !strings.Contains(r.stderr, "still held after waiting 300ms") {
		t.Errorf("--wait running out: stdout %q, stderr %q", r.stdout, r.stderr)
	}

	// A waiter gets the key when the holder's command ends.
	w := start(t, env, "run", "--wait", "1m", key, "--", "echo", "waiter ran")
	h.stdin.Close()
	if code := h.exit(t); code != 0 {
		t.Fatalf("holder exit %d: %s", code, h.errText())
	}
	if l := w.line(t); l != "waiter ran" {
		t.Errorf("waiter printed %q", l)
	}
	if code := w.exit(t); code != 0 {
		t.Errorf("waiter exit %d: %s", code, w.errText())
	}
	cli(t, env, "run", "--try", key, "--", "true").want(t, 0, "--try on the freed key")
}

// SIGINT to locker while CMD runs (what Ctrl-C does outside a terminal's
// foreground) reaches CMD, and the key is released.
func TestRunInterruptWhileRunningUnlocks(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	h := holder(t, env, key)
	h.signal(t, syscall.SIGINT)
	if code := h.exit(t); code != 128+int(syscall.SIGINT) {
		t.Fatalf("interrupted run: exit %d, want %d (CMD killed by SIGINT); stderr: %s", code, 128+int(syscall.SIGINT), h.errText())
	}
	cli(t, env, "status", key).want(t, exitFail, "status after the interrupted run")
	cli(t, env, "run", "--try", key, "--", "true").want(t, 0, "--try after the interrupted run")
}

// SIGINT while waiting for the key gives up and leaves nothing behind.
func TestRunInterruptWhileWaiting(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	h := holder(t, env, key)
	w := start(t, env, "run", key, "--", "echo", "must not run")
	// No output tells that it waits; interrupted before, it takes the same path.
	cli(t, env, "run", "--wait", "200ms", key, "--", "true").want(t, exitTempFail, "a third contender")
	w.signal(t, syscall.SIGINT)
	if code := w.exit(t); code != 128+int(syscall.SIGINT) {
		t.Fatalf("interrupted waiter: exit %d, want 130; stderr: %s", code, w.errText())
	}
	if !strings.Contains(w.errText(), "nothing is held") {
		t.Errorf("interrupted waiter said %q", w.errText())
	}
	h.stdin.Close()
	h.exit(t)
	cli(t, env, "run", "--try", key, "--", "true").want(t, 0, "--try after the waiter gave up")
}

// A lease taken away (unlock --force from another process) stops CMD with
// SIGTERM and makes locker exit 70.
func TestRunLeaseLostStopsCommand(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	p := start(t, env, "run", "--ttl", "3s", key, "--", "sh", "-c",
		`trap 'echo got SIGTERM; exit 3' TERM; echo ready; while :; do sleep 0.05; done`)
	if l := p.line(t); l != "ready" {
		t.Fatalf("child printed %q", l)
	}
	cli(t, env, "unlock", "--force", key).want(t, 0, "unlock --force")
	if l := p.line(t); l != "got SIGTERM" {
		t.Errorf("child printed %q, want its SIGTERM trap's output", l)
	}
	if code := p.exit(t); code != exitLeaseLost {
		t.Fatalf("run after lease loss: exit %d, want %d; stderr: %s", code, exitLeaseLost, p.errText())
	}
	if !strings.Contains(p.errText(), "lost the lease") {
		t.Errorf("stderr %q does not say the lease was lost", p.errText())
	}
}

// A command that ignores SIGTERM is killed after --grace.
func TestRunLeaseLostKillsAfterGrace(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	p := start(t, env, "run", "--ttl", "3s", "--grace", "300ms", key, "--", "sh", "-c",
		`trap '' TERM; echo ready; while :; do sleep 0.05; done`)
	if l := p.line(t); l != "ready" {
		t.Fatalf("child printed %q", l)
	}
	cli(t, env, "unlock", "--force", key).want(t, 0, "unlock --force")
	if code := p.exit(t); code != exitLeaseLost {
		t.Fatalf("exit %d, want %d; stderr: %s", code, exitLeaseLost, p.errText())
	}
	if !strings.Contains(p.errText(), "SIGKILL") {
		t.Errorf("stderr %q does not mention SIGKILL", p.errText())
	}
}

func TestRunCommandNotFound(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	r := cli(t, env, "run", key, "--", "/nonexistent/command").want(t, exitNotFound, "run of a missing command")
	if !strings.Contains(r.stderr, "/nonexistent/command") {
		t.Errorf("stderr %q does not name the command", r.stderr)
	}
	cli(t, env, "status", key).want(t, exitFail, "status after the failed run")
}

func TestDefaultBackendIsCreated(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	env := append(testEnv(t), "XDG_STATE_HOME="+state) // the later value wins
	cli(t, env, "run", uniqueKey(t), "--", "true").want(t, 0, "run on the default backend")
	assertPrivateDB(t, filepath.Join(state, "locker"))

	// Without XDG_STATE_HOME: ~/.local/state/locker.
	home := t.TempDir()
	var noXDG []string
	for _, kv := range testEnv(t) {
		if !strings.HasPrefix(kv, "XDG_STATE_HOME=") && !strings.HasPrefix(kv, "HOME=") {
			noXDG = append(noXDG, kv)
		}
	}
	cli(t, append(noXDG, "HOME="+home), "run", uniqueKey(t), "--", "true").want(t, 0, "run with HOME only")
	assertPrivateDB(t, filepath.Join(home, ".local", "state", "locker"))
}

func assertPrivateDB(t *testing.T, dir string) {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatalf("state directory: %v", err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("%s has mode %v, want 0700", dir, perm)
	}
	if _, err := os.Stat(filepath.Join(dir, "locker.db")); err != nil {
		t.Errorf("the SQLite database: %v", err)
	}
}

// --limit N makes KEY a semaphore; bad values are usage errors.
func TestRunLimitFlag(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	cli(t, env, "run", "--limit", "0", key, "--", "true").want(t, exitUsage, "--limit 0")
	cli(t, env, "run", "--limit", "2", "--shared", key, "--", "true").want(t, exitUsage, "--limit with --shared")
	cli(t, env, "run", "--limit", "2", key, "--", "true").want(t, 0, "--limit 2")
}
