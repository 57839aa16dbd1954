package peers

import (
	"context"
	dbsql "database/sql"
	"path/filepath"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", for the round trip

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// The backends with no peer are measured here too, so that one run of
// scripts/bench-peers gives every backend's figures side by side.

// BenchmarkRedisCluster measures our adapter on the three-master cluster.
// Round trip: PING to the master of the benchmark's slot, as the cluster
// client routes it (any master: they are alike).
func BenchmarkRedisCluster(b *testing.B) {
	u := testenv.URL(b, "LOCKER_TEST_REDIS_CLUSTER")
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: strings.Split(u.Host, ",")})
	cleanup(b, c.Close)
	compare(b, func(ctx context.Context) error { return c.Ping(ctx).Err() }, ours(u.String()))
}

// BenchmarkSQLite measures our adapter on a database file of the run's
// own, beside its hand-off floors (sqlitefloor_test.go) on the same file.
// Round trip: SELECT 1 on a connection to the same file.
func BenchmarkSQLite(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.db")
	db, err := dbsql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	cleanup(b, db.Close)
	compare(b, func(ctx context.Context) error {
		_, err := db.ExecContext(ctx, "SELECT 1")
		return err
	},
		ours("sqlite://"+filepath.ToSlash(path)),
		subject{"sqlite-row-floor", func(tb testing.TB) locker.Locker { return sqliteRowFloorClient(tb, path) }},
		subject{"sqlite-fenced-floor", func(tb testing.TB) locker.Locker { return sqliteFencedFloorClient(tb, path) }},
	)
}
