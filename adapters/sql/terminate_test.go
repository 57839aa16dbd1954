package sql_test

import (
	"context"
	"crypto/rand"
	dbsql "database/sql"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker"
	lsql "github.com/locker-go/locker/adapters/sql"
	"github.com/locker-go/locker/internal/testenv"
)

// Postgres terminates the holder's connections (pg_terminate_backend, as
// an operator or a failover does): the lease survives on new connections,
// nobody else gets the key meanwhile, and Unlock then frees it.
func TestPostgresBackendTerminated(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_POSTGRES")
	hu, app := lsql.WithApp(u, "locker-terminate-")
	holder, other := open(t, hu), open(t, u.String())
	defer holder.Close()
	defer other.Close()
	admin := openDB(t, "pgx", u.String())
	outliveCuts(t, holder, other, func(ctx context.Context) int {
		var cut int
		if err := admin.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&cut); err != nil {
			t.Fatal(err)
		}
		return cut
	})
}

// MariaDB kills the holder's connections (KILL CONNECTION, as an operator
// or a failover does), on a server of the test's own so that every other
// connection may go: the lease survives on new connections, nobody else
// gets the key meanwhile, and Unlock then frees it.
func TestMySQLConnectionsKilled(t *testing.T) {
	testenv.URL(t, "LOCKER_TEST_MYSQL") // -short skips; the server is our own
	srv := testenv.StartMariaDB(t)
	// Two URLs, two pools: each Locker has connections of its own.
	holder, other := open(t, srv.URL()+"?timeout=5s"), open(t, srv.URL()+"?timeout=6s")
	defer holder.Close()
	defer other.Close()
	u, _ := url.Parse(srv.URL())
	admin := openDB(t, "mysql", "root@tcp("+u.Host+")"+u.Path)
	admin.SetMaxOpenConns(1)
	outliveCuts(t, holder, other, func(ctx context.Context) int { return killClients(ctx, t, admin) })
}

// outliveCuts has holder lock a key for a TTL of 1s, and over three TTLs
// cuts its connections (cut says how many): the lease must live on, other
// must not get the key meanwhile, and after Unlock it must, fence higher.
func outliveCuts(t *testing.T, holder, other locker.Locker, cut func(context.Context) int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := "cut-" + rand.Text()
	const ttl = time.Second
	lease, err := holder.Lock(ctx, key, locker.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if cut(ctx) == 0 {
			t.Fatal("no connection of the holder's to cut")
		}
		if l, err := other.TryLock(ctx, key); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("TryLock while the holder's connections were cut = %v, %v; want ErrLocked", l, err)
		}
		select {
		case <-lease.Done():
			t.Fatalf("the lease ended when its connections were cut: %v", lease.Err())
		case <-time.After(ttl): // a TTL must pass for the renewals to matter: time is the condition
		}
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the connections were cut: %v", err)
	}
	next, err := other.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("the key was not free after Unlock: %v", err)
	}
	if next.Fence() <= lease.Fence() {
		t.Errorf("fence %d is not above %d", next.Fence(), lease.Fence())
	}
	_ = next.Unlock(ctx)
}

// killClients kills every client connection but admin's own, and says how
// many.
func killClients(ctx context.Context, t *testing.T, admin *dbsql.DB) int {
	t.Helper()
	rows, err := admin.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND COMMAND NOT IN ('Daemon', 'Binlog Dump') AND USER NOT IN ('system user', 'event_scheduler')")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		if _, err := admin.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10)); err != nil && !strings.Contains(err.Error(), "Unknown thread") {
			t.Fatal(err)
		}
	}
	return len(ids)
}
