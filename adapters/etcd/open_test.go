package etcd

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		url       string
		endpoints []string
		user      string
		password  string
		prefix    string
		tls       bool
		timeout   time.Duration
	}{
		{url: "etcd://127.0.0.1:2379", endpoints: []string{"127.0.0.1:2379"}, prefix: DefaultPrefix, timeout: DefaultRequestTimeout},
		{url: "etcd://h3,h1:1,h2:2/app/locks", endpoints: []string{"h3:2379", "h1:1", "h2:2"}, prefix: "/app/locks/", timeout: DefaultRequestTimeout},
		{url: "etcd://u:p%40ss@h:1/x/", endpoints: []string{"h:1"}, user: "u", password: "p@ss", prefix: "/x/", timeout: DefaultRequestTimeout},
		{url: "etcd://[::1]/", endpoints: []string{"[::1]:2379"}, prefix: DefaultPrefix, timeout: DefaultRequestTimeout},
		{url: "etcds://h:1/p?timeout=750ms", endpoints: []string{"h:1"}, prefix: "/p/", tls: true, timeout: 750 * time.Millisecond},
		{url: "etcd://h:1?tls=true", endpoints: []string{"h:1"}, prefix: DefaultPrefix, tls: true, timeout: DefaultRequestTimeout},
		{url: "ETCD://h:1?tls=false", endpoints: []string{"h:1"}, prefix: DefaultPrefix, timeout: DefaultRequestTimeout},
	}
	for _, tc := range tests {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		cfg, opts, err := parseURL(u)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		c := config{prefix: DefaultPrefix}
		for _, o := range opts {
			o(&c)
		}
		if !strings.HasSuffix(c.prefix, "/") {
			c.prefix += "/"
		}
		if !slices.Equal(cfg.Endpoints, tc.endpoints) || cfg.Username != tc.user || cfg.Password != tc.password ||
			c.prefix != tc.prefix || (cfg.TLS != nil) != tc.tls || c.timeout != tc.timeout || cfg.DialTimeout != tc.timeout {
			t.Errorf("%s: endpoints %q user %q password %q prefix %q tls %v timeout %v; want %q %q %q %q %v %v",
				tc.url, cfg.Endpoints, cfg.Username, cfg.Password, c.prefix, cfg.TLS != nil, c.timeout,
				tc.endpoints, tc.user, tc.password, tc.prefix, tc.tls, tc.timeout)
		}
		if cfg.Logger == nil {
			t.Errorf("%s: no quiet logger set", tc.url)
		}
	}
}

func TestParseURLRejects(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cret-pw"
	bad := []string{
		"etcd://user:" + secret + "@",           // no host
		"etcd:user:" + secret + "@h",            // opaque
		"etcd://user:" + secret + "@h:0/p",      // port out of range
		"etcd://user:" + secret + "@h:99999/p",  // port out of range
		"etcd://user:" + secret + "@h:1,,h:2/p", // empty host in the list
		"etcd://user:" + secret + "@h:1/p?tls=maybe",
		"etcd://user:" + secret + "@h:1/p?colour=blue",
		"etcd://user:" + secret + "@h:1/p?timeout=soon",
		"etcd://user:" + secret + "@h:1/p?timeout=-1s",
		"etcd://user:" + secret + "@h:1/p?timeout=1s&timeout=2s",
		"etcds://user:" + secret + "@h:1/p?tls=false",
		"etcd://user:" + secret + "@h:1/p?ca=/x.pem",    // ca without TLS
		"etcds://user:" + secret + "@h:1/p?cert=/c.pem", // cert without key
		"etcds://user:" + secret + "@h:1/p?ca=" + notPEM,
		"etcds://user:" + secret + "@h:1/p?ca=" + filepath.Join(dir, "missing.pem"),
		"etcd://:" + secret + "@h:1/p", // password without user
		"redis://user:" + secret + "@h:1",
	}
	for _, raw := range bad {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		_, _, err = parseURL(u)
		if !errors.Is(err, locker.ErrInvalidURL) {
			t.Errorf("%s: err = %v, want ErrInvalidURL", u.Redacted(), err)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

func TestEscape(t *testing.T) {
	// Every string of up to 4 characters over an alphabet that can fake an
	// escape sequence: the mapping must be reversible, free of '/', and keep
	// prefixes exactly (a range over escape(p) holds just the keys under p).
	alphabet := []string{"a", "/", "%", "2", "F", "5", "ж"}
	var all []string
	var gen func(s string, n int)
	gen = func(s string, n int) {
		all = append(all, s)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			gen(s+c, n-1)
		}
	}
	gen("", 4)
	for _, a := range all {
		e := escape(a)
		if strings.Contains(e, "/") || unescape(e) != a {
			t.Fatalf("escape(%q) = %q, unescapes to %q", a, e, unescape(e))
		}
	}
	for _, p := range all[:len(all)/7] {
		for _, k := range all {
			if got, want := strings.HasPrefix(escape(k), escape(p)), strings.HasPrefix(k, p); got != want {
				t.Fatalf("escape(%q) has prefix escape(%q): %v, but %q has prefix %q: %v", k, p, got, k, p, want)
			}
		}
	}
	if q := "/l/" + escape("a") + "/"; strings.HasPrefix("/l/"+escape("a/b")+"/x", q) || strings.HasPrefix("/l/"+escape("ab")+"/x", q) {
		t.Error(`the queue of "a" covers entries of "a/b" or "ab"`)
	}
}

func TestSplitEntry(t *testing.T) {
	for _, k := range []string{"a", "a/b", "a%2Fb", "%", "ключ/x"} {
		name := "/l/" + escape(k) + "/RANDOM"
		if got, space, ok := splitEntry("/l/", name); !ok || got != k || space != driver.Plain {
			t.Errorf("splitEntry(%q) = %q, %v, %v; want %q in the plain space", name, got, space, ok, k)
		}
		name = "/l/" + subtreeMark + escape(k) + "/RANDOM"
		if got, space, ok := splitEntry("/l/", name); !ok || got != k || space != driver.Subtree {
			t.Errorf("splitEntry(%q) = %q, %v, %v; want %q in the subtree space", name, got, space, ok, k)
		}
	}
	if _, _, ok := splitEntry("/l/", "/other/a/x"); ok {
		t.Error("splitEntry accepted a key outside the prefix")
	}
}
