package locker_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/locker-go/locker"
	_ "github.com/locker-go/locker/adapters/etcd"
	_ "github.com/locker-go/locker/adapters/mem"
	_ "github.com/locker-go/locker/adapters/redis"
	_ "github.com/locker-go/locker/adapters/redsync"
	_ "github.com/locker-go/locker/adapters/sql"
	_ "github.com/locker-go/locker/adapters/zookeeper"
)

// listener counts the connections made to it: a URL that is refused must
// contact nothing.
func listener(t *testing.T) (host string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().String(), accepted
}

// Every URL rule, on every scheme (issue 13, defect 6): a port outside
// 1–65535, a missing host, a host given twice, an unknown parameter. Each
// is ErrInvalidURL, names no password, and contacts nothing.
func TestURLRulesOnEveryScheme(t *testing.T) {
	live, accepted := listener(t)
	bad := map[string][]string{
		"redis":    {"redis://:pw-secret@127.0.0.1:99999", "redis://:pw-secret@:36999", "redis://:pw-secret@" + live + "?nosuch=1", "redis://:pw-secret@" + live + ",127.0.0.1:1"},
		"redlock":  {"redlock://:pw-secret@" + live + "," + live + ",127.0.0.1:2", "redlock://:pw-secret@127.0.0.1:99999,127.0.0.1:2,127.0.0.1:3", "redlock://:pw-secret@:1,127.0.0.1:2,127.0.0.1:3", "redlock://:pw-secret@" + live + ",127.0.0.1:2,127.0.0.1:3?nosuch=1"},
		"zk":       {"zk://u:pw-secret@127.0.0.1:99999/r", "zk://u:pw-secret@:1/r", "zk://u:pw-secret@" + live + "," + live + "/r", "zk://u:pw-secret@" + live + "/r?nosuch=1"},
		"etcd":     {"etcd://u:pw-secret@127.0.0.1:99999/p", "etcd://u:pw-secret@:1/p", "etcd://u:pw-secret@" + live + "," + live + "/p", "etcd://u:pw-secret@" + live + "/p?nosuch=1"},
		"postgres": {"postgres://u:pw-secret@127.0.0.1:99999/db", "postgres://u:pw-secret@:0/db", "postgres://u:pw-secret@" + live + "," + live + "/db", "postgres://u:pw-secret@" + live + "/db?table=a&table=b"},
		"sqlite":   {"sqlite://host/x.db", "sqlite:///tmp/x.db?nosuch=1"},
		"mem":      {"mem://u:pw-secret@x", "mem://x:1", "mem://x?nosuch=1"},
	}
	for scheme, urls := range bad {
		for _, raw := range urls {
			t.Run(scheme, func(t *testing.T) {
				l, err := locker.Open(context.Background(), raw)
				if err == nil {
					l.Close()
				}
				if !errors.Is(err, locker.ErrInvalidURL) || err != nil && strings.Contains(err.Error(), "pw-secret") {
					t.Errorf("Open(%s) = %v; want ErrInvalidURL without the password", strings.ReplaceAll(raw, "pw-secret", "xxx"), err)
				}
			})
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("refused URLs made %d connections", n)
	}
}

// A URL that does not parse is refused naming the part at fault, never
// repeating it: the text may hold a password.
func TestUnparsableURLNamesThePart(t *testing.T) {
	for _, c := range []struct{ url, part string }{
		{"redis://user:s3cret@host:abc", "port"},
		{"redis://user:s3cr/et@host:6379", "port"},           // an unescaped '/' in the password
		{"postgres://user:s3cr%zzet@host/db", "'%'"},         // a bad escape
		{"etcd://[::1:2379/s3cret", "IPv6"},                  // '[' not closed
		{"redis://host\x7fs3cret:6379", "control character"}, // DEL
	} {
		_, err := locker.Open(context.Background(), c.url)
		if !errors.Is(err, locker.ErrInvalidURL) || !strings.Contains(err.Error(), c.part) {
			t.Errorf("Open(%q): %v; want ErrInvalidURL naming %s", c.url, err, c.part)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr") {
			t.Errorf("Open(%q): %v repeats the URL's text", c.url, err)
		}
	}
}
