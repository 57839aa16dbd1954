package main

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locker-go/locker"
)

// `locker migrate check` says "not yet" (exit 1, the key named) while a
// phase-1 process holds a key on from alone, and "safe" (exit 0) once the
// key is held through a Migration or on to; status and list on a migrate:
// URL show both sides.
func TestMigrateCheck(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	from := "sqlite://" + filepath.ToSlash(filepath.Join(dir, "from.db"))
	to := "sqlite://" + filepath.ToSlash(filepath.Join(dir, "to.db"))
	fromL, err := locker.Open(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	defer fromL.Close()
	toL, err := locker.Open(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	defer toL.Close()
	env := testEnv(t)
	check := func(want int, args ...string) result {
		t.Helper()
		r := cli(t, env, append([]string{"migrate", "check", "--from", from, "--to", to}, args...)...)
		if r.code != want {
			t.Fatalf("migrate check %v: exit %d, want %d; stdout %q stderr %q", args, r.code, want, r.stdout, r.stderr)
		}
		return r
	}
	if r := check(0); !strings.Contains(r.stdout, "safe") {
		t.Fatalf("nothing held: %q, want safe", r.stdout)
	}
	phase1, err := fromL.TryLock(ctx, "invoices")
	if err != nil {
		t.Fatal(err)
	}
	if r := check(1); !strings.Contains(r.stdout, "not yet") || !strings.Contains(r.stdout, `"invoices"`) {
		t.Fatalf("a phase-1 holder: %q, want not yet, naming the key", r.stdout)
	}
	var out struct {
		Safe     bool `json:"safe"`
		FromOnly []struct {
			Key   string `json:"key"`
			Fence uint64 `json:"fence"`
		} `json:"from_only"`
	}
	if err := json.Unmarshal([]byte(check(1, "--json").stdout), &out); err != nil || out.Safe || len(out.FromOnly) != 1 ||
		out.FromOnly[0].Key != "invoices" || out.FromOnly[0].Fence != phase1.Fence() {
		t.Fatalf("--json: %+v (%v), want the phase-1 lock", out, err)
	}
	if err := phase1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	phase2, err := locker.Migration(fromL, toL).TryLock(ctx, "invoices")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = phase2.Unlock(ctx) }()
	if r := check(0, "inv"); !strings.Contains(r.stdout, "safe") {
		t.Fatalf("held through a Migration: %q, want safe", r.stdout)
	}

	mig := "migrate:?from=" + url.QueryEscape(from) + "&to=" + url.QueryEscape(to)
	for _, args := range [][]string{{"status", "--backend", mig, "invoices"}, {"list", "--backend", mig}} {
		r := cli(t, env, args...)
		if r.code != 0 || strings.Count(r.stdout, `"invoices"`) != 2 || !strings.Contains(r.stdout, "from ") || !strings.Contains(r.stdout, "to ") {
			t.Fatalf("%s on a migrate: URL: exit %d, %q; want both sides holding", args[0], r.code, r.stdout)
		}
	}
	if r := cli(t, env, "migrate", "check", "--from", from); r.code != exitUsage {
		t.Fatalf("migrate check without --to: exit %d, want %d", r.code, exitUsage)
	}
}

// `locker run` on a migrate: URL holds the key on both sides while CMD
// runs, with a fence above from's.
func TestRunOnAMigrateURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	from := "sqlite://" + filepath.ToSlash(filepath.Join(dir, "from.db"))
	to := "sqlite://" + filepath.ToSlash(filepath.Join(dir, "to.db"))
	mig := "migrate:?from=" + url.QueryEscape(from) + "&to=" + url.QueryEscape(to)
	env := testEnv(t)
	r := cli(t, env, "run", "--backend", mig, "k", "--", "sh", "-c",
		`"$2" status --backend "$0" k >/dev/null && "$2" status --backend "$1" k >/dev/null && echo "fence $LOCKER_FENCE"`, from, to, bin)
	if r.code != 0 || !strings.Contains(r.stdout, "fence ") {
		t.Fatalf("run on a migrate: URL: exit %d, stdout %q, stderr %q; want both sides held while CMD ran", r.code, r.stdout, r.stderr)
	}
}
