package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Help is on stdout with exit 0, for locker and for each command, by
// every spelling; it lists the command's flags.
func TestHelp(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "Available Commands:"},
		{[]string{"-h"}, "Available Commands:"},
		{[]string{"help"}, "Available Commands:"},
		{[]string{"help", "run"}, "--ttl"},
		{[]string{"run", "--help"}, "--ttl"},
		{[]string{"run", "-h"}, "--wait"},
		{[]string{"run", "--ttl", "5s", "--help"}, "--grace"},
		{[]string{"status", "--help"}, "--json"},
		{[]string{"list", "-h"}, "--json"},
		{[]string{"unlock", "--help"}, "--force"},
		{[]string{"bench", "--help"}, "--leases"},
		{[]string{"check", "--help"}, "--ttl"},
		{[]string{"migrate", "check", "--help"}, "--from"},
	} {
		r := cli(t, env, c.args...).want(t, 0, strings.Join(c.args, " "))
		if !strings.Contains(r.stdout, c.want) || !strings.Contains(r.stdout, "Usage:") || r.stderr != "" {
			t.Errorf("locker %s: stdout %q, stderr %q; want help on stdout naming %s", strings.Join(c.args, " "), r.stdout, r.stderr, c.want)
		}
	}
}

// A command's own -h goes to the command: `locker run KEY -- grep -h x`
// runs grep -h.
func TestHelpFlagOfTheCommandRunsIt(t *testing.T) {
	t.Parallel()
	r := cli(t, testEnv(t), "run", uniqueKey(t), "--", "sh", "-c", `echo "ran $0 $1"`, "-h", "x").want(t, 0, "run -- sh -h")
	if strings.TrimSpace(r.stdout) != "ran -h x" {
		t.Errorf("stdout %q, want the command's output", r.stdout)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := cli(t, testEnv(t), "--version").want(t, 0, "--version")
	if !strings.HasPrefix(r.stdout, "locker ") {
		t.Errorf("--version printed %q", r.stdout)
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := cli(t, env, "completion", sh).want(t, 0, "completion "+sh)
		if !strings.Contains(r.stdout, "locker") || len(r.stdout) < 500 {
			t.Errorf("completion %s printed %d bytes", sh, len(r.stdout))
		}
	}
	// What a shell asks on <TAB>: run's flags, from the same definitions.
	r := cli(t, env, "__complete", "run", "--w").want(t, 0, "__complete run --w")
	if !strings.Contains(r.stdout, "--wait") {
		t.Errorf("completing run --w offered %q", r.stdout)
	}
}

// status --json and list --json print what the tables show, for scripts.
func TestStatusListJSON(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	h := holder(t, env, key+"/a")
	var one lockOut
	r := cli(t, env, "status", "--json", key+"/a").want(t, 0, "status --json")
	if err := json.Unmarshal([]byte(r.stdout), &one); err != nil {
		t.Fatalf("status --json printed %q: %v", r.stdout, err)
	}
	if one.Key != key+"/a" || one.Mode != "exclusive" || one.Space != "key" || len(one.Holders) != 1 ||
		one.Holders[0].Fence == 0 || one.Holders[0].Expires == nil {
		t.Errorf("status --json: %+v", one)
	}
	var all []lockOut
	r = cli(t, env, "list", key+"/", "--json").want(t, 0, "list --json")
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil || len(all) != 1 || all[0].Key != key+"/a" {
		t.Errorf("list --json printed %q (%v)", r.stdout, err)
	}
	r = cli(t, env, "status", "--json", key+"/free").want(t, exitFail, "status --json of a free key")
	if strings.TrimSpace(r.stdout) != "null" {
		t.Errorf("status --json of a free key printed %q, want null", r.stdout)
	}
	r = cli(t, env, "list", "--json", key+"/none/").want(t, 0, "list --json of nothing")
	if strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("list --json of nothing printed %q, want []", r.stdout)
	}
	h.stdin.Close()
	h.exit(t)
}

// run -c runs a shell command, as flock(1) does; every argument is a key.
func TestRunShellCommand(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	r := cli(t, env, "run", "-c", `echo "fence $LOCKER_FENCE"; exit 3`, key+"/a", key+"/b").want(t, 3, "run -c")
	if !strings.HasPrefix(r.stdout, "fence ") {
		t.Errorf("run -c printed %q", r.stdout)
	}
	cli(t, env, "run", "-c", "true", key+"/a", "--", "true").want(t, exitUsage, "run -c with a CMD too")
}

// --wait 0 does not wait, as --try; without --wait, run waits.
func TestRunWaitZeroIsTry(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	h := holder(t, env, key)
	r := cli(t, env, "run", "--wait", "0", key, "--", "true").want(t, exitTempFail, "--wait 0 on a held key")
	if !strings.Contains(r.stderr, "held") {
		t.Errorf("--wait 0: stderr %q", r.stderr)
	}
	h.stdin.Close()
	h.exit(t)
	cli(t, env, "run", "--wait", "0", key, "--", "true").want(t, 0, "--wait 0 on a free key")
}

// A TTL no lease can be kept alive at is refused, naming the least.
func TestRunRefusesTTLTooShort(t *testing.T) {
	t.Parallel()
	r := cli(t, testEnv(t), "run", "--ttl", "1ms", uniqueKey(t), "--", "true").want(t, exitUsage, "--ttl 1ms")
	if !strings.Contains(r.stderr, "100ms") {
		t.Errorf("stderr %q; want the least TTL named", r.stderr)
	}
}

// list --watch prints the locks again whenever they change (not at a
// terminal: only on a change), until interrupted, then exits 0.
func TestListWatch(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	w := start(t, env, "list", "--watch", "--interval", "50ms", key+"/")
	waitLine := func(want string) {
		t.Helper()
		for {
			l, ok := <-w.lines
			if !ok {
				t.Fatalf("list --watch ended before printing %q; stderr %q", want, w.errText())
			}
			if strings.Contains(l, want) {
				return
			}
		}
	}
	waitLine(" 0 locks")
	h := holder(t, env, key+"/a")
	waitLine(" 1 locks")
	waitLine(key + "/a")
	h.stdin.Close()
	h.exit(t)
	waitLine(" 0 locks")
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-w.done
	if code := w.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("list --watch interrupted: exit %d, want 0; stderr %q", code, w.errText())
	}
}

// list --watch --json prints a line of JSON per change.
func TestListWatchJSON(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	w := start(t, env, "list", "--watch", "--json", "--interval", "50ms", key+"/")
	var states [][]lockOut
	h := (*proc)(nil)
	for len(states) < 2 {
		l, ok := <-w.lines
		if !ok {
			t.Fatalf("list --watch --json ended; stderr %q", w.errText())
		}
		var s []lockOut
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		states = append(states, s)
		if h == nil {
			h = holder(t, env, key+"/a")
		}
	}
	if len(states[0]) != 0 || len(states[1]) != 1 || states[1][0].Key != key+"/a" {
		t.Errorf("states %+v; want none, then the held key", states)
	}
	h.stdin.Close()
	h.exit(t)
}

// run -v logs what happens to the lease: here, its loss and why.
func TestRunVerboseLogsTheLoss(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	h := holder(t, env, key, "-v", "--ttl", "3s")
	cli(t, env, "unlock", "--force", key).want(t, 0, "unlock --force")
	if code := h.exit(t); code != exitLeaseLost {
		t.Fatalf("holder: exit %d, want %d", code, exitLeaseLost)
	}
	if e := h.errText(); !strings.Contains(e, "level=WARN") || !strings.Contains(e, "lease lost") || !strings.Contains(e, key) {
		t.Errorf("stderr %q; want the loss logged with its key", e)
	}
}

// locker run records who holds the key, where and doing what, which
// status shows (--label to say it otherwise).
func TestRunRecordsALabel(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	h := holder(t, env, key+"/a")
	r := cli(t, env, "status", "--json", key+"/a").want(t, 0, "status --json")
	var info lockOut
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatal(err)
	}
	if l := info.Holders[0].Label; !strings.Contains(l, " pid ") || !strings.Contains(l, "echo \"held $LOCKER_FENCE\"") {
		t.Errorf("default label %q; want user@host pid N: CMD", l)
	}
	h2 := holder(t, env, key+"/b", "--label", "nightly backup")
	r = cli(t, env, "status", key+"/b").want(t, 0, "status")
	if !strings.Contains(r.stdout, "LABEL") || !strings.Contains(r.stdout, "nightly backup") {
		t.Errorf("status printed %q; want the label", r.stdout)
	}
	cli(t, env, "run", "--label", "bad\x1flabel", key+"/c", "--", "true").want(t, exitUsage, "a label with U+001F")
	for _, p := range []*proc{h, h2} {
		p.stdin.Close()
		p.exit(t)
	}
}

// The README's install command works as written, from the checkout. It
// compiles the command and every adapter without the race detector, a
// minute of both cores on a cold cache: scripts/test runs it in its
// non-race step, where that build is mostly cached and competes with
// nothing, not beside the race-detector tests it would starve.
func TestReadmeInstallCommand(t *testing.T) {
	if raceBuild {
		t.Skip("runs in scripts/test's non-race step (go test -run TestReadmeInstallCommand ./cmd/locker)")
	}
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, "go install ./cmd/locker") {
			line = strings.TrimSpace(strings.SplitN(l, "#", 2)[0])
		}
	}
	if line == "" {
		t.Fatal("the README has no `go install ./cmd/locker` line")
	}
	gobin := t.TempDir()
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	out, err := exec.Command(filepath.Join(gobin, "locker"), "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "locker ") {
		t.Errorf("the installed locker --version: %q, %v", out, err)
	}
}
