package main

import (
	"slices"
	"strings"
	"testing"
)

func TestScrubMasksCredentials(t *testing.T) {
	rememberSecrets("postgres://u:longsecretvalue@h:5432/db?sslpassword=anothersecret1")
	for _, in := range []string{
		"dial postgres://u:shortpw@h:5432/db failed",
		"failed to connect to `host=h user=u password=shortpw database=db`",
		"auth failed for longsecretvalue",
		`sslpassword="anothersecret1"`,
	} {
		out := scrub(in)
		for _, secret := range []string{"shortpw", "longsecretvalue", "anothersecret1"} {
			if strings.Contains(out, secret) {
				t.Errorf("scrub(%q) = %q still shows %s", in, out, secret)
			}
		}
	}
	if got := redactURL("redis://:pw@h:1/0?password=x&db=2"); got != "redis://:xxxxx@h:1/0?db=2&password=xxxxx" {
		t.Errorf("redactURL = %q", got)
	}
}

func TestParseInterleaved(t *testing.T) {
	fs := newFlags("x")
	b := fs.String("backend", "", "")
	pos, err := parseInterleaved(fs, []string{"KEY", "--backend", "u", "more", "--", "--not-a-flag"})
	if err != nil || *b != "u" || !slices.Equal(pos, []string{"KEY", "more", "--not-a-flag"}) {
		t.Errorf("parseInterleaved = %q, %v; backend %q", pos, err, *b)
	}
	if _, err := parseInterleaved(newFlags("y"), []string{"--nope"}); err == nil {
		t.Error("an unknown flag parsed")
	}

}
