package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"

	"github.com/locker-go/locker/internal/servers"
)

// needs lists, per backend, the Debian packages to install when a check
// says a program is missing.
var needs = map[string][]struct {
	missing  func() bool
	packages []string
}{
	"redis":         {{programs("redis-server", "redis-cli"), []string{"redis-server"}}},
	"redlock":       {{programs("redis-server", "redis-cli"), []string{"redis-server"}}},
	"redis-cluster": {{programs("redis-server", "redis-cli"), []string{"redis-server"}}},
	"zookeeper":     {{zkMissing, []string{"zookeeper"}}},
	"zk-ensemble":   {{zkMissing, []string{"zookeeper"}}},
	"etcd":          {{programs("etcd"), []string{"etcd-server"}}, {programs("etcdctl"), []string{"etcd-client"}}}, // etcdctl: for whoever debugs
	"etcd-cluster":  {{programs("etcd"), []string{"etcd-server"}}, {programs("etcdctl"), []string{"etcd-client"}}},
	"postgres":      {{pgMissing, []string{"postgresql"}}},
	"mysql":         {{programs("mariadbd", "mariadb-install-db", "mariadb"), []string{"mariadb-server", "mariadb-client"}}},
}

func programs(names ...string) func() bool {
	return func() bool {
		for _, n := range names {
			if _, err := exec.LookPath(n); err != nil {
				return true
			}
		}
		return false
	}
}

func zkMissing() bool { return servers.ZKClasspath() == "" || programs("java")() }

func pgMissing() bool {
	_, err := servers.PostgresBin()
	return err != nil || programs("psql")()
}

// ensurePackages installs with apt-get what bs need and is missing.
func ensurePackages(bs []*backend) error {
	var pkgs []string
	for _, b := range bs {
		for _, n := range needs[b.name] {
			if n.missing() {
				pkgs = append(pkgs, n.packages...)
			}
		}
	}
	slices.Sort(pkgs)
	if pkgs = slices.Compact(pkgs); len(pkgs) == 0 {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("missing packages %v and no apt-get here: install them by hand, or use docker-compose.yml", pkgs)
	}
	logf("apt-get update")
	if err := asRoot("apt-get", "update", "-q"); err != nil {
		return err
	}
	logf("installing: %v", pkgs)
	if err := asRoot(append([]string{"apt-get", "install", "-y", "-q", "--no-install-recommends"}, pkgs...)...); err != nil {
		return err
	}
	if slices.Contains(pkgs, "etcd-server") {
		stopPackagedEtcd()
	}
	return nil
}

// stopPackagedEtcd: Debian starts a packaged service on install where the
// init system allows it. Redis's and PostgreSQL's are left alone (others on
// the machine may use them; they are on other ports), but the etcd one is of
// no use to anybody.
func stopPackagedEtcd() {
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		_ = asRoot("systemctl", "disable", "--now", "etcd.service")
	} else {
		_ = asRoot("service", "etcd", "stop")
		_ = asRoot("update-rc.d", "etcd", "disable")
	}
	logf("stopped and disabled the packaged etcd service (port 2379); ours uses %d", etcdPort)
}

// asRoot runs a command as root (directly, or through sudo), its output on
// our stderr.
func asRoot(args ...string) error {
	args = append([]string{"env", "DEBIAN_FRONTEND=noninteractive"}, args...)
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("sudo"); err != nil {
			return errors.New("need root (or sudo) to run: " + fmt.Sprint(args))
		}
		args = append([]string{"sudo"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v: %w", args, err)
	}
	return nil
}
