package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// leaderScript prints the term it leads in, and "stopped" on SIGTERM.
const leaderScript = `trap 'echo stopped; exit 3' TERM; echo "leading $LOCKER_FENCE"; while :; do sleep 0.05; done`

// A leader paused past its TTL (SIGSTOP) loses office to a waiting
// candidate; resumed, it stops its command and campaigns again, and leads
// once the other resigns. An observer sees each leader in order of terms.
func TestElectCampaignsAgain(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	name := uniqueKey(t)
	obs := start(t, env, "observe", "--json", name)
	if l := observed(t, obs); l.Leader {
		t.Fatalf("first observation %+v; want no leader", l)
	}
	a := start(t, env, "elect", "--ttl", "1s", "--label", "a", name, "--", "sh", "-c", leaderScript)
	termA := leading(t, a)
	waitLeader(t, obs, "a", termA)
	b := start(t, env, "elect", "--label", "b", name, "--", "sh", "-c", leaderScript)
	a.signal(t, syscall.SIGSTOP)
	termB := leading(t, b)
	a.signal(t, syscall.SIGCONT)
	if l := a.line(t); l != "stopped" {
		t.Fatalf("the paused leader's command printed %q; want it stopped on resuming", l)
	}
	waitLeader(t, obs, "b", termB)
	b.signal(t, syscall.SIGTERM) // reaches b's command, which exits 3: b resigns
	if code := b.exit(t); code != 3 {
		t.Errorf("b exit %d, want its command's 3; stderr: %s", code, b.errText())
	}
	termA2 := leading(t, a)
	waitLeader(t, obs, "a", termA2)
	if !(termA < termB && termB < termA2) {
		t.Errorf("terms %d, %d, %d; want them rising", termA, termB, termA2)
	}
	if !strings.Contains(a.errText(), "campaigning for") {
		t.Errorf("a's stderr %q does not say it campaigns again", a.errText())
	}
	a.signal(t, syscall.SIGTERM)
	a.exit(t)
	obs.signal(t, syscall.SIGINT)
	if code := obs.exit(t); code != 0 {
		t.Errorf("observe exit %d after SIGINT; stderr: %s", code, obs.errText())
	}
}

// With --once, a leader that lost office exits 70.
func TestElectOnce(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	name := uniqueKey(t)
	a := start(t, env, "elect", "--once", "--ttl", "1s", name, "--", "sh", "-c", leaderScript)
	leading(t, a)
	b := start(t, env, "elect", name, "--", "sh", "-c", leaderScript)
	a.signal(t, syscall.SIGSTOP)
	leading(t, b)
	a.signal(t, syscall.SIGCONT)
	if code := a.exit(t); code != exitLeaseLost {
		t.Errorf("--once after losing office: exit %d, want %d; stderr: %s", code, exitLeaseLost, a.errText())
	}
	b.signal(t, syscall.SIGTERM)
	b.exit(t)
	cli(t, env, "elect", name).want(t, exitUsage, "elect without a command")
	cli(t, env, "elect", "a", "b", "--", "true").want(t, exitUsage, "elect of two names")
}

// leading reads an elect's "leading TERM" line and returns the term.
func leading(t *testing.T, p *proc) uint64 {
	t.Helper()
	l := p.line(t)
	term, err := strconv.ParseUint(strings.TrimPrefix(l, "leading "), 10, 64)
	if err != nil || term == 0 {
		t.Fatalf("elect's command printed %q; want \"leading TERM\"", l)
	}
	return term
}

// observed reads one line of observe --json.
func observed(t *testing.T, p *proc) leaderOut {
	t.Helper()
	var l leaderOut
	if line := p.line(t); json.Unmarshal([]byte(line), &l) != nil {
		t.Fatalf("observe printed %q; want JSON", line)
	}
	return l
}

// waitLeader reads observe's lines until the leader with label and term;
// no leader is allowed on the way (between two terms), any other is not.
func waitLeader(t *testing.T, p *proc, label string, term uint64) {
	t.Helper()
	for {
		l := observed(t, p)
		switch {
		case l.Leader && l.Label == label && l.Term == term:
			return
		case l.Leader:
			t.Fatalf("observed %+v; want %q in term %d next", l, label, term)
		}
	}
}
