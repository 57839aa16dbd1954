package peers

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance"
	"github.com/locker-go/locker/internal/testenv"

	_ "github.com/locker-go/locker/adapters/etcd"
	_ "github.com/locker-go/locker/adapters/redis"
	_ "github.com/locker-go/locker/adapters/redsync"
	_ "github.com/locker-go/locker/adapters/sql"
	_ "github.com/locker-go/locker/adapters/zookeeper"
)

// ttl is every lease's length, ours (the default) and the peers'.
const ttl = locker.DefaultTTL

// prefix keeps the peers' keys and nodes apart from everything else on the
// shared servers; conformance.Bench makes each key unique to the run.
const prefix = "peers-bench/"

// subject is one lock implementation to measure: ours or a peer.
type subject struct {
	name      string
	newLocker func(tb testing.TB) locker.Locker
}

// compare runs conformance.Bench on each subject in turn, against the same
// server and with the same round trip, so that their figures divide. A
// subject's clients are made on, and cleaned up with, its benchmark b.
func compare(b *testing.B, roundTrip func(context.Context) error, subjects ...subject) {
	for _, s := range subjects {
		b.Run(s.name, func(b *testing.B) {
			newLocker := func(context.Context) (locker.Locker, error) { return s.newLocker(b), nil }
			conformance.Bench(b, conformance.Harness{NewLocker: newLocker, RoundTrip: roundTrip})
		})
	}
}

// ours opens our adapter for rawURL: each call is a new Locker, as in the
// adapters' own benchmarks (a Locker of its own client, but on etcd, whose
// Lockers of one process on one URL share theirs, and on the SQL
// databases, whose share a pool).
func ours(rawURL string) subject {
	return subject{name: "ours", newLocker: func(tb testing.TB) locker.Locker {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := locker.Open(ctx, rawURL)
		if err != nil {
			tb.Fatal(err)
		}
		return l
	}}
}

// cleanup registers close, reporting its error, for a client the
// benchmark itself uses.
func cleanup(tb testing.TB, close func() error) {
	tb.Cleanup(func() {
		if err := close(); err != nil {
			tb.Logf("close: %v", err)
		}
	})
}

// BenchmarkRedis compares our single-Redis adapter with bsm/redislock
// retrying every 10 ms, and with the least a FIFO hand-off through Redis
// costs (fifo-floor), and that with a lease's least records: TTL, fence,
// owner (fifo-lease-floor). Round trip: PING.
func BenchmarkRedis(b *testing.B) {
	u := testenv.URL(b, "LOCKER_TEST_REDIS")
	c := goredis.NewClient(&goredis.Options{Addr: u.Host})
	cleanup(b, c.Close)
	compare(b, func(ctx context.Context) error { return c.Ping(ctx).Err() },
		ours(u.String()),
		subject{"bsm-redislock", func(tb testing.TB) locker.Locker { return redislockClient(tb, u.Host) }},
		subject{"fifo-floor", func(tb testing.TB) locker.Locker { return fifoFloorClient(tb, u.Host) }},
		subject{"fifo-lease-floor", func(tb testing.TB) locker.Locker { return fifoLeaseFloorClient(tb, u.Host) }},
	)
}

// BenchmarkRedlock compares our Redlock adapter with redsync's Mutex
// (default retry) on the same five masters, and with the least a FIFO
// hand-off through a quorum of them costs (redlock-floor), and that with
// each waiter's round that joins the key's queue on the masters
// (redlock-queued-floor). Round trip:
// PING to the first master, as the adapter's conformance benchmark
// measures it.
func BenchmarkRedlock(b *testing.B) {
	u := testenv.URL(b, "LOCKER_TEST_REDLOCK")
	addrs := strings.Split(u.Host, ",")
	c := goredis.NewClient(&goredis.Options{Addr: addrs[0]})
	cleanup(b, c.Close)
	compare(b, func(ctx context.Context) error { return c.Ping(ctx).Err() },
		ours(u.String()),
		subject{"redsync", func(tb testing.TB) locker.Locker { return redsyncClient(tb, addrs) }},
		subject{"redlock-floor", func(tb testing.TB) locker.Locker { return redlockFloorClient(tb, addrs, false) }},
		subject{"redlock-queued-floor", func(tb testing.TB) locker.Locker { return redlockFloorClient(tb, addrs, true) }},
	)
}

// BenchmarkEtcd compares our etcd adapter with etcd's concurrency.Mutex,
// and with the least a hand-off through a watch costs (etcd-watch-floor),
// that with each waiter's place in etcd (etcd-queued-floor), that with an
// owner-checked release txn that hands the key over (etcd-inbox-floor),
// and that with every client watching the queue, as ours did while each
// Locker had its own client (etcd-fanout-floor).
// Round trip: a Get.
func BenchmarkEtcd(b *testing.B) {
	u := testenv.URL(b, "LOCKER_TEST_ETCD")
	c := etcdClient(b, u.Host)
	compare(b, func(ctx context.Context) error {
		_, err := c.Get(ctx, prefix+"rtt")
		return err
	},
		ours(u.String()),
		subject{"etcd-concurrency", func(tb testing.TB) locker.Locker { return etcdMutexClient(tb, u.Host) }},
		subject{"etcd-watch-floor", func(tb testing.TB) locker.Locker { return etcdFloorClient(tb, u.Host) }},
		subject{"etcd-queued-floor", func(tb testing.TB) locker.Locker { return etcdQueuedFloorClient(tb, u.Host) }},
		subject{"etcd-inbox-floor", func(tb testing.TB) locker.Locker { return etcdInboxFloorClient(tb, u.Host) }},
		subject{"etcd-fanout-floor", func(tb testing.TB) locker.Locker { return etcdFanoutFloorClient(tb, u.Host) }},
	)
}

// BenchmarkZooKeeper compares our ZooKeeper adapter with go-zookeeper's
// Lock recipe, both on sessions of the TTL's length, and with the least a
// hand-off through a watch costs (zk-watch-floor), and that with each
// waiter's place in ZooKeeper (zk-queued-floor). Round trip: Exists("/").
func BenchmarkZooKeeper(b *testing.B) {
	u := testenv.URL(b, "LOCKER_TEST_ZK")
	c := zkConn(b, u.Host)
	ou := *u
	q := ou.Query()
	q.Set("session_timeout", ttl.String()) // the adapter wants TTL >= session timeout
	ou.RawQuery = q.Encode()
	compare(b, func(context.Context) error {
		_, _, err := c.Exists("/")
		return err
	},
		ours(ou.String()),
		subject{"go-zookeeper", func(tb testing.TB) locker.Locker { return zkLockClient(tb, u.Host) }},
		subject{"zk-watch-floor", func(tb testing.TB) locker.Locker { return zkFloorClient(tb, u.Host) }},
		subject{"zk-queued-floor", func(tb testing.TB) locker.Locker { return zkQueuedFloorClient(tb, u.Host) }},
	)
}

// BenchmarkPostgres compares our SQL adapter on Postgres (its clients in
// one process, and each a pool of its own: ours-apart) with a lock row
// polled every 10 ms and with pg_advisory_lock, and with the least a hand-off
// through NOTIFY costs (pg-notify-floor). Round trip: SELECT 1.
func BenchmarkPostgres(b *testing.B) {
	u := testenv.URL(b, "LOCKER_TEST_POSTGRES")
	c := pgConn(b, u)
	createLockRowTable(b, c)
	compare(b, func(ctx context.Context) error {
		_, err := c.Exec(ctx, "SELECT 1")
		return err
	},
		ours(u.String()),
		subject{"ours-apart", func(tb testing.TB) locker.Locker { return pgOursApart(tb, u) }},
		subject{"pg-lock-row", func(tb testing.TB) locker.Locker { return lockRowClient(tb, u) }},
		subject{"pg-advisory-lock", func(tb testing.TB) locker.Locker { return advisoryLockClient(tb, u) }},
		subject{"pg-notify-floor", func(tb testing.TB) locker.Locker { return notifyFloorClient(tb, u) }},
		subject{"pg-row-floor", func(tb testing.TB) locker.Locker { return pgRowFloorClient(tb, u) }},
		subject{"pg-fenced-floor", func(tb testing.TB) locker.Locker { return pgFencedFloorClient(tb, u) }},
	)
}

// pgConn opens one Postgres connection, closed when tb ends.
func pgConn(tb testing.TB, u *url.URL) *pgx.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, u.String())
	if err != nil {
		tb.Fatal(err)
	}
	cleanup(tb, func() error { return c.Close(context.Background()) })
	return c
}

// etcdClient opens one etcd client, closed when tb ends.
func etcdClient(tb testing.TB, endpoint string) *clientv3.Client {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second, Logger: nopZap})
	if err != nil {
		tb.Fatal(err)
	}
	cleanup(tb, c.Close)
	return c
}
