package servers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Etcd is one etcd member of the cluster named Token, whose members are
// Cluster ("name=http://host:peerport", comma-separated). It runs without
// fsync where it can (3.4+): the tests' servers keep nothing that matters,
// and a SIGKILL loses nothing the kernel was given.
type Etcd struct {
	Name    string
	Dir     string // data/ goes here
	Client  int    // client port, on loopback
	Peer    int    // peer port, on loopback
	Cluster string
	Token   string
}

// Cmd is the command that runs the member in the foreground. A member whose
// data directory holds a member/ joins as existing (restarted after a
// kill); else as new.
func (e Etcd) Cmd() (*exec.Cmd, error) {
	bin, err := look("etcd", "etcd-server")
	if err != nil {
		return nil, err
	}
	data := e.Data()
	state := "new"
	if _, err := os.Stat(filepath.Join(data, "member")); err == nil {
		state = "existing"
	}
	client, peer := "http://"+Addr(e.Client), "http://"+Addr(e.Peer)
	cmd := exec.Command(bin, "--name", e.Name, "--data-dir", data,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", e.Cluster, "--initial-cluster-token", e.Token, "--initial-cluster-state", state)
	cmd.Args = append(cmd.Args, etcdOptional(bin)...)
	cmd.Dir = e.Dir
	if runtime.GOARCH == "arm64" { // etcd 3.4 refuses to run on arm64 unless told
		cmd.Env = append(os.Environ(), "ETCD_UNSUPPORTED_ARCH=arm64")
	}
	return cmd, nil
}

// etcdOptional are the settings not every etcd has (3.4+): no fsync, and
// its log on stderr. Each is tried once with --version: an etcd that does
// not know a flag refuses it (3.4's --help does not list all it knows).
func etcdOptional(bin string) []string {
	etcdHelp.Do(func() {
		for _, flags := range [][]string{{"--unsafe-no-fsync"}, {"--logger=zap", "--log-outputs=stderr"}} {
			if exec.Command(bin, append(flags, "--version")...).Run() == nil {
				etcdHelp.args = append(etcdHelp.args, flags...)
			}
		}
	})
	return etcdHelp.args
}

var etcdHelp struct {
	sync.Once
	args []string
}

// Data is the member's data directory.
func (e Etcd) Data() string { return filepath.Join(e.Dir, "data") }

// EtcdMember is "name=http://127.0.0.1:peer", an entry of Etcd.Cluster.
func EtcdMember(name string, peer int) string { return name + "=http://" + Addr(peer) }

// Answers is nil when the member is healthy (in a cluster: it has a leader).
func (e Etcd) Answers(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+Addr(e.Client)+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if !strings.Contains(strings.ReplaceAll(string(body), " ", ""), `"health":"true"`) {
		return fmt.Errorf("etcd on %s is not healthy: %s", Addr(e.Client), body)
	}
	return nil
}
