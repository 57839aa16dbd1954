package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/locker-go/locker/conformance"
)

// locker check runs the conformance suite's checks: each passes, or is
// skipped for want of what a deployment does not offer (Crash, Count).
// The TTL is long for the suite (the adapter's own conformance run takes
// 1 s): this binary, built with -race beside the package's other parallel
// binaries on 2 cores, once kept no 2 s lease alive (CI, stop 30).
func TestCheckOnSQLite(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "check.db")
	r := cli(t, testEnv(t), "check", "--ttl", "4s", "--backend", db).want(t, 0, "check on SQLite")
	checks := conformance.Checks()
	for _, c := range checks {
		if !strings.Contains(r.stdout, "\nPASS  "+c.Name+"\n") && !strings.Contains(r.stdout, "\nSKIP  "+c.Name+": ") {
			t.Errorf("check printed no PASS or SKIP line for %s", c.Name)
		}
	}
	if n := strings.Count(r.stdout, "\nPASS  ") + strings.Count(r.stdout, "\nSKIP  "); n != len(checks) || strings.Contains(r.stdout, "FAIL") {
		t.Errorf("check printed %d PASS or SKIP lines of %d:\n%s", n, len(checks), r.stdout)
	}
}
