package main

import (
	"net/url"
	"strings"
	"testing"
)

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	for name, args := range map[string][]string{
		"no command":       {},
		"unknown command":  {"frobnicate"},
		"run without CMD":  {"run", "k"},
		"run without KEY":  {"run"},
		"--try and --wait": {"run", "--try", "--wait", "1s", "k", "--", "true"},
		"empty key":        {"run", "", "--", "true"},
		"zero TTL":         {"run", "--ttl", "0s", "k", "--", "true"},
		"bad flag":         {"run", "--frob", "k", "--", "true"},
		"status two keys":  {"status", "a", "b"},
		"bench ops 0":      {"bench", "--ops", "0"},
	} {
		r := cli(t, env, args...)
		if r.code != exitUsage || r.stderr == "" {
			t.Errorf("%s: exit %d, stderr %q; want %d and a message", name, r.code, r.stderr, exitUsage)
		}
	}
}

func TestUnknownSchemeListsKnownOnes(t *testing.T) {
	t.Parallel()
	r := cli(t, testEnv(t), "run", "--backend", "nosuch://host/x", "k", "--", "true").want(t, exitUsage, "unknown scheme")
	for _, want := range []string{`"nosuch"`, "redis", "sqlite", "postgres"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q does not mention %s", r.stderr, want)
		}
	}
}

// Credentials never appear in output, also when a driver's error would
// repeat them: an unreachable Postgres, and Redis, with a password.
func TestPasswordsAreRedacted(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-s3cr3t-pw"
	env := testEnv(t)
	for name, u := range map[string]string{
		"postgres password": "postgres://locker:" + secret + "@127.0.0.1:1/locker?sslmode=disable&connect_timeout=2",
		"redis password":    "redis://:" + secret + "@127.0.0.1:1",
		"password param":    "postgres://127.0.0.1:1/locker?password=" + secret + "&connect_timeout=2",
		"migrate from":      "migrate:?from=" + url.QueryEscape("redis://:"+secret+"@127.0.0.1:1") + "&to=" + url.QueryEscape("mem://redacted"),
		"migrate to":        "migrate:?from=" + url.QueryEscape("mem://redacted") + "&to=" + url.QueryEscape("postgres://locker:"+secret+"@127.0.0.1:1/locker?sslmode=disable&connect_timeout=2"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, args := range [][]string{
				{"run", "--backend", u, "k", "--", "true"},
				{"status", "--backend", u, "k"},
				{"bench", "--backend", u, "--ops", "1", "--json"},
			} {
				r := cli(t, env, args...)
				if r.code != exitUnavailable {
					t.Errorf("%s: exit %d, want %d (unavailable); stderr %q", args[0], r.code, exitUnavailable, r.stderr)
				}
				if strings.Contains(r.stdout+r.stderr, secret) {
					t.Errorf("%s: the password appears in the output:\nstdout: %s\nstderr: %s", args[0], r.stdout, r.stderr)
				}
				if !strings.Contains(r.stderr, "127.0.0.1:1") {
					t.Errorf("%s: stderr %q does not name the unreachable address", args[0], r.stderr)
				}
			}
		})
	}
}
