package servers

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
)

// Redis is a redis-server on a loopback port. By default it keeps nothing on
// disk, so a restart comes back empty, as a lock server without persistence
// does; Extra may say otherwise (a later setting wins).
type Redis struct {
	Port  int
	Dir   string   // its working directory (nodes.conf, an append-only file)
	Extra []string // more settings, e.g. RedisClusterNode or an append-only file
}

// RedisClusterNode are the settings of a Redis Cluster master whose cluster
// bus listens on busPort (0: Redis's default, its port + 10000; another
// needs Redis 7): its identity and slots are kept in nodes.conf in its
// Dir, so restarted after a kill it rejoins with its slots, empty; a
// master that is down leaves the others serving theirs.
func RedisClusterNode(busPort int) []string {
	args := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "no"}
	if busPort != 0 {
		args = append(args, "--cluster-port", strconv.Itoa(busPort))
	}
	return args
}

// Cmd is the command that runs the server in the foreground.
func (r Redis) Cmd() (*exec.Cmd, error) {
	bin, err := look("redis-server", "redis-server")
	if err != nil {
		return nil, err
	}
	args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(r.Port), "--daemonize", "no",
		"--save", "", "--appendonly", "no", "--dir", r.Dir, "--logfile", "", "--loglevel", "notice",
		"--maxclients", "10000"}, r.Extra...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = r.Dir
	return cmd, nil
}

// Title is what the running server's command line shows (redis-server
// rewrites it to "redis-server 127.0.0.1:PORT"; until then the arguments
// say "--port PORT").
func (r Redis) Title() []string {
	return []string{Addr(r.Port), fmt.Sprintf("--port %d ", r.Port)}
}

// Answers is nil when the server answers PING.
func (r Redis) Answers(ctx context.Context) error {
	_, err := redisCall(ctx, Addr(r.Port), "PING")
	return err
}

// CreateRedisCluster gives three (or more) fresh cluster nodes the slots,
// one master each, no replicas.
func CreateRedisCluster(ctx context.Context, addrs []string) error {
	bin, err := look("redis-cli", "redis-server")
	if err != nil {
		return err
	}
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	return nil
}

// RedisClusterInfo is CLUSTER INFO of the node at addr.
func RedisClusterInfo(ctx context.Context, addr string) (string, error) {
	return redisCall(ctx, addr, "CLUSTER", "INFO")
}

// RedisClusterOK is a Check that the node at addr sees the cluster ok, with
// all n nodes known.
func RedisClusterOK(addr string, n int) Check {
	return func(ctx context.Context) error {
		info, err := RedisClusterInfo(ctx, addr)
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d\r", n)) {
			return fmt.Errorf("cluster node %s is not ok with %d nodes:\n%s", addr, n, info)
		}
		return nil
	}
}

// redisCall sends one command and reads its reply, a status or a bulk
// string. A client library would retry and log each refused dial; a check
// wants one try, in silence.
func redisCall(ctx context.Context, addr string, args ...string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(deadline)
	}
	req := fmt.Sprintf("*%d\r\n", len(args))
	for _, a := range args {
		req += fmt.Sprintf("$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, req); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"):
		return line[1:], nil
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("redis %s: reply %q", addr, line)
		}
		body := make([]byte, n+2)
		_, err = io.ReadFull(r, body)
		return string(body[:n]), err
	default: // -ERR, or -LOADING while it reads its data
		return "", fmt.Errorf("redis %s: %s", addr, line)
	}
}
