package zookeeper

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/locker-go/locker"
)

func TestParseURL(t *testing.T) {
	good := map[string]urlConfig{
		"zk://127.0.0.1:12181/locker":         {servers: []string{"127.0.0.1:12181"}, root: "/locker"},
		"zk://a:1,b:2/x/y?session_timeout=2s": {servers: []string{"a:1", "b:2"}, root: "/x/y", sessionTimeout: 2 * time.Second},
		"ZK://u:p%40ss@h/":                    {servers: []string{"h:2181"}, root: DefaultRoot, user: "u", password: "p@ss"},
		"zk://[::1]:2181":                     {servers: []string{"[::1]:2181"}, root: DefaultRoot},
	}
	for raw, want := range good {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseURL(u)
		if err != nil || !slices.Equal(got.servers, want.servers) || got.root != want.root ||
			got.user != want.user || got.password != want.password || got.sessionTimeout != want.sessionTimeout {
			t.Errorf("parseURL(%s) = %+v, %v; want %+v", raw, got, err, want)
		}
	}
}

func TestParseURLRejects(t *testing.T) {
	bad := []string{
		"zk:///locker",                    // no host
		"zk://h:notaport/locker",          // port
		"zk://h:1,:2/locker",              // empty host
		"zk://h:1/a//b",                   // empty segment
		"zk://h:1/a/../b",                 // relative
		"zk://h:1/a/",                     // trailing slash
		"zk://h:1/a?session_timeout=-1s",  // negative
		"zk://h:1/a?session_timeout=soon", // not a duration
		"zk://h:1/a?sessiontimeout=1s",    // unknown
		"zk://h:1/a?session_timeout=1s&session_timeout=2s",
		"zk://secretuser@h:1/a",    // user without password
		"zk://u:hunter2@h:1/a?x=1", // password must not leak
		"zk://h:1/a#frag",
	}
	for _, raw := range bad {
		_, err := locker.Open(context.Background(), raw)
		if !errors.Is(err, locker.ErrInvalidURL) {
			t.Errorf("Open(%s) = %v, want ErrInvalidURL", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

func TestEscape(t *testing.T) {
	keys := []string{"a", "a/b", "a%2Fb", "a%b", ".", "..", ".a", "a.", "a..b", "ключ", "😀", "a\x01b",
		"\u0085", "\uf000", "\ufff0", "\uffff", "a b", "a*", "%", "%25", "/", "//"}
	seen := map[string]string{}
	for _, k := range keys {
		e := escape(k)
		if prev, dup := seen[e]; dup {
			t.Errorf("escape(%q) = escape(%q) = %q", k, prev, e)
		}
		seen[e] = k
		if back, err := unescape(e); err != nil || back != k {
			t.Errorf("unescape(escape(%q)) = %q, %v", k, back, err)
		}
		if e == "." || e == ".." || strings.Contains(e, "/") || !utf8.ValidString(e) {
			t.Errorf("escape(%q) = %q is not a node name", k, e)
		}
		for _, r := range e {
			if r != '%' && needsEscape(r) {
				t.Errorf("escape(%q) = %q holds %U, which ZooKeeper refuses", k, e, r)
			}
		}
		for i := range k { // prefixes map to prefixes
			if p := k[:i]; utf8.ValidString(p) && !strings.HasPrefix(e, escape(p)) {
				t.Errorf("escape(%q) = %q does not begin with escape(%q) = %q", k, e, p, escape(p))
			}
		}
	}
}
