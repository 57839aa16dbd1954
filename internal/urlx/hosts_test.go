package urlx

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/locker-go/locker"
)

func TestHosts(t *testing.T) {
	good := map[string][]string{
		"a":              {"a:9"},
		"a:1,b:65535":    {"a:1", "b:65535"},
		"[::1]:5,[::2]":  {"[::1]:5", "[::2]:9"},
		"127.0.0.1:6379": {"127.0.0.1:6379"},
	}
	for in, want := range good {
		if got, err := Hosts(in, "9"); err != nil || !slices.Equal(got, want) {
			t.Errorf("Hosts(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", ":1", "a:0", "a:99999", "a:x", "a,", "a:1,a:1", "a,a:9", "::1", "a:1:2"} {
		if got, err := Hosts(in, "9"); err == nil {
			t.Errorf("Hosts(%q) = %v; want an error", in, got)
		}
	}
}

func TestInvalid(t *testing.T) {
	u, _ := url.Parse("zk://u:hunter2@h:1/r")
	err := Invalid(u, "bad %s", "thing")
	if !errors.Is(err, locker.ErrInvalidURL) || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "bad thing") {
		t.Errorf("Invalid = %v", err)
	}
}
