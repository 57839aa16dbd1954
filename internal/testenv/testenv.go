// Package testenv finds the backends that adapter tests talk to: the
// servers scripts/backends starts, or others named by environment variables.
package testenv

import (
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// Defaults are the addresses scripts/backends serves (DESIGN.md's table).
var Defaults = map[string]string{
	"LOCKER_TEST_REDIS":    "redis://127.0.0.1:16379",
	"LOCKER_TEST_REDLOCK":  "redlock://127.0.0.1:16380,127.0.0.1:16381,127.0.0.1:16382,127.0.0.1:16383,127.0.0.1:16384",
	"LOCKER_TEST_ZK":       "zk://127.0.0.1:12181/locker",
	"LOCKER_TEST_ETCD":     "etcd://127.0.0.1:12379/locker",
	"LOCKER_TEST_POSTGRES": "postgres://locker:locker@127.0.0.1:15432/locker?sslmode=disable",
	"LOCKER_TEST_SQLITE":   "sqlite:///tmp/locker-test.db",
	"LOCKER_TEST_MYSQL":    "mysql://locker:locker@127.0.0.1:13306/locker",
	// The HA forms (DESIGN.md's scale-out table).
	"LOCKER_TEST_ETCD_CLUSTER":  "etcd://127.0.0.1:12479,127.0.0.1:12579,127.0.0.1:12679/locker",
	"LOCKER_TEST_ZK_ENSEMBLE":   "zk://127.0.0.1:12281,127.0.0.1:12381,127.0.0.1:12481/locker",
	"LOCKER_TEST_REDIS_CLUSTER": "redis-cluster://127.0.0.1:17001,127.0.0.1:17002,127.0.0.1:17003",
}

// URL returns the backend URL in env (else its default) after checking
// that every host in it accepts TCP connections. An unreachable backend
// fails the test, naming scripts/backends up; -short skips it instead.
func URL(t testing.TB, env string) *url.URL {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: skipping the test that needs the backend of %s", env)
	}
	raw := os.Getenv(env)
	if raw == "" {
		raw = Defaults[env]
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: cannot parse the URL", env)
	}
	if u.Host == "" {
		return u // a file (SQLite)
	}
	for _, host := range strings.Split(u.Host, ",") {
		c, err := net.DialTimeout("tcp", host, 2*time.Second)
		if err != nil {
			t.Fatalf("backend %s (%s) is not reachable: %v\nstart the test backends with: scripts/backends up", u.Redacted(), env, err)
		}
		c.Close()
	}
	return u
}
