package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckOnSQLite(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "check.db")
	r := cli(t, testEnv(t), "check", "--backend", db, "--ttl", "1s").want(t, 0, "check on SQLite")
	if n := strings.Count(r.stdout, "\nPASS  "); n != len(checks) || strings.Contains(r.stdout, "FAIL") {
		t.Errorf("check printed %d PASS lines of %d:\n%s", n, len(checks), r.stdout)
	}
}
