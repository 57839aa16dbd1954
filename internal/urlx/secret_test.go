package urlx

import (
	"net/url"
	"strings"
	"testing"
)

func TestRedactAndScrub(t *testing.T) {
	for _, raw := range []string{
		"postgres://u:s3cr%2Fet@h:1/db?sslmode=disable",
		"postgres://h/db?password=s3cr/et",
		"etcd:u:s3cr/et@h",
		"redis://:s3cr%2Fet@h:1?token=s3cr/et",
		// a migrate: URL's sides, each query-escaped
		"migrate:?from=" + url.QueryEscape("redis://:s3cr%2Fet@h:1") + "&to=" + url.QueryEscape("postgres://u:s3cr%2Fet@h:1/db"),
		"migrate:?from=" + url.QueryEscape("postgres://h/db?password=s3cr/et") + "&to=mem://",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := Redact(u); strings.Contains(got, "s3cr") {
			t.Errorf("Redact(%q) = %q shows the secret", raw, got)
		}
		msg := "dial " + raw + ": failed for s3cr/et and s3cr%2Fet"
		if got := Scrub(msg, u); strings.Contains(got, "s3cr") && !strings.HasPrefix(raw, "etcd:") {
			t.Errorf("Scrub = %q shows the secret", got)
		}
	}
	u, _ := url.Parse("redis://h:1/0?prefix=a")
	if got := Redact(u); got != "redis://h:1/0?prefix=a" {
		t.Errorf("Redact of a URL without secrets changed it: %q", got)
	}
}
