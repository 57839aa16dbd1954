package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql "pgx", to read Postgres's counters
	goredis "github.com/redis/go-redis/v9"
)

// A callCounter reads how many requests the backend's servers have served
// so far, as the servers count them: `locker bench --leases` takes the
// difference over its window. servers is how many it sums over (Redlock's
// masters: the figure shown is per master).
type callCounter struct {
	read    func(ctx context.Context) (int64, error)
	servers int
	what    string // what is counted, for the table's note
}

// counterFor returns the counter of the backend at URL u; ok is false
// where the backend has no server to ask (SQLite, mem).
func counterFor(u *url.URL) (c callCounter, ok bool) {
	hosts := strings.Split(u.Host, ",")
	switch u.Scheme {
	case "redis", "rediss":
		return callCounter{read: func(ctx context.Context) (int64, error) { return redisCalls(ctx, u) }, servers: 1, what: "Redis scripts run"}, true
	case "redlock":
		return callCounter{read: func(ctx context.Context) (int64, error) { return sumHosts(ctx, hosts, redisHostCalls(u)) }, servers: len(hosts), what: "Redis scripts run per master"}, true
	case "redis-cluster":
		return callCounter{read: func(ctx context.Context) (int64, error) { return sumHosts(ctx, hosts, redisHostCalls(u)) }, servers: 1, what: "Redis scripts run, all masters"}, true
	case "etcd":
		return callCounter{read: func(ctx context.Context) (int64, error) { return sumHosts(ctx, hosts, etcdCalls) }, servers: 1, what: "etcd gRPC messages received"}, true
	case "zk":
		return callCounter{read: func(ctx context.Context) (int64, error) { return sumHosts(ctx, hosts, zkCalls) }, servers: 1, what: "ZooKeeper packets received"}, true
	case "postgres", "postgresql":
		return callCounter{read: func(ctx context.Context) (int64, error) { return postgresCalls(ctx, u) }, servers: 1, what: "Postgres write transactions"}, true
	case "mysql":
		return callCounter{read: func(ctx context.Context) (int64, error) { return mysqlCalls(ctx, u) }, servers: 1, what: "MySQL statements (Questions)"}, true
	}
	return callCounter{}, false
}

// sumHosts sums one count over every host.
func sumHosts(ctx context.Context, hosts []string, count func(context.Context, string) (int64, error)) (int64, error) {
	var sum int64
	for _, h := range hosts {
		n, err := count(ctx, h)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", h, err)
		}
		sum += n
	}
	return sum, nil
}

// redisCalls counts the scripts run (EVAL, EVALSHA and their _RO forms in
// INFO commandstats): every call of the Redis and Redlock adapters but
// their pub/sub. (commandstats and total_commands_processed also count
// each command a script runs, which are not calls.)
func redisCalls(ctx context.Context, u *url.URL) (int64, error) {
	bare := *u
	bare.RawQuery = ""
	o, err := goredis.ParseURL(bare.String())
	if err != nil {
		return 0, err
	}
	c := goredis.NewClient(o)
	defer c.Close()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, line := range strings.Split(info, "\n") {
		// cmdstat_get:calls=12,usec=...
		if _, rest, ok := strings.Cut(line, ":calls="); ok && strings.HasPrefix(line, "cmdstat_eval") {
			n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
			sum += n
		}
	}
	return sum, nil
}

// redisHostCalls is redisCalls on one of a Redlock URL's masters.
func redisHostCalls(u *url.URL) func(context.Context, string) (int64, error) {
	return func(ctx context.Context, host string) (int64, error) {
		one := &url.URL{Scheme: "redis", Host: host, User: u.User}
		return redisCalls(ctx, one)
	}
}

// etcdCalls sums grpc_server_msg_received_total in the member's metrics:
// every unary request and every message of a stream (a lease keep-alive).
func etcdCalls(ctx context.Context, host string) (int64, error) {
	return metricSum(ctx, "http://"+host+"/metrics", "grpc_server_msg_received_total")
}

// metricSum sums the samples of one Prometheus counter at addr.
func metricSum(ctx context.Context, addr, name string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		if f := strings.Fields(line); len(f) >= 2 {
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return int64(sum), sc.Err()
}

// zkCalls is zk_packets_received from the server's mntr command.
func zkCalls(ctx context.Context, host string) (int64, error) {
	conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", host)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "mntr"); err != nil {
		return 0, err
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "zk_packets_received"); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no zk_packets_received in mntr's answer (is mntr in 4lw.commands.whitelist?)")
}

// postgresCalls counts the write transactions begun (the next
// transaction id: every lock, release and renewal writes), at once:
// pg_stat_database's counts are published up to seconds late.
func postgresCalls(ctx context.Context, u *url.URL) (int64, error) {
	bare := *u
	q := url.Values{}
	if v := u.Query().Get("sslmode"); v != "" {
		q.Set("sslmode", v)
	}
	bare.RawQuery = q.Encode()
	db, err := sql.Open("pgx", bare.String())
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.QueryRowContext(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&n)
	return n, err
}

// mysqlCalls is the server's Questions: statements clients sent.
func mysqlCalls(ctx context.Context, u *url.URL) (int64, error) {
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, strings.TrimPrefix(u.Path, "/")
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var name string
	var n int64
	err = db.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Questions'`).Scan(&name, &n)
	return n, err
}
