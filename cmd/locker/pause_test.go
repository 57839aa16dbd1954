package main

import (
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/locker-go/locker/internal/testenv"
)

// A holder process paused (SIGSTOP) past its TTL, on every backend: its
// keep-alive stops with it, so another process takes the key, with a
// higher fence; once resumed, the paused holder finds its lease lost,
// stops its command (SIGTERM) and exits 70. Only the fence protects what
// the command writes in between, which is why LOCKER_FENCE is passed on.
func TestRunHolderPausedPastTTL(t *testing.T) {
	for _, b := range []struct{ name, env string }{
		{"redis", "LOCKER_TEST_REDIS"}, {"redlock", "LOCKER_TEST_REDLOCK"}, {"zookeeper", "LOCKER_TEST_ZK"},
		{"etcd", "LOCKER_TEST_ETCD"}, {"postgres", "LOCKER_TEST_POSTGRES"}, {"sqlite", ""},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			env := testEnv(t)
			if b.env != "" {
				env = testEnv(t, "LOCKER_BACKEND="+testenv.URL(t, b.env).String())
			}
			pausedHolder(t, env, uniqueKey(t))
		})
	}
}

func pausedHolder(t *testing.T, env []string, key string) {
	p := start(t, env, "run", "--ttl", "2s", key, "--", "sh", "-c",
		`trap 'exit 3' TERM; echo "held $LOCKER_FENCE"; while :; do sleep 0.05; done`)
	old := fenceOf(t, p.line(t))
	p.signal(t, syscall.SIGSTOP) // locker only: CMD runs on in its own process group
	next := cli(t, env, "run", "--wait", "30s", key, "--", "sh", "-c", `echo "held $LOCKER_FENCE"`)
	p.signal(t, syscall.SIGCONT)
	next.want(t, 0, "run while the holder is paused past its TTL")
	if f := fenceOf(t, strings.TrimSpace(next.stdout)); f <= old {
		t.Errorf("the next holder's fence %d is not above the paused holder's %d", f, old)
	}
	if code := p.exit(t); code != exitLeaseLost {
		t.Fatalf("resumed holder: exit %d, want %d; stderr: %s", code, exitLeaseLost, p.errText())
	}
	// The trap's exit status, as locker reports it: its command got SIGTERM.
	if !strings.Contains(p.errText(), "lost the lease") || !strings.Contains(p.errText(), "exit status 3") {
		t.Errorf("resumed holder's stderr %q does not say the lease was lost and its command stopped", p.errText())
	}
}

func fenceOf(t *testing.T, line string) uint64 {
	t.Helper()
	f, err := strconv.ParseUint(strings.TrimPrefix(line, "held "), 10, 64)
	if err != nil || !strings.HasPrefix(line, "held ") {
		t.Fatalf("command printed %q, want \"held FENCE\"", line)
	}
	return f
}
