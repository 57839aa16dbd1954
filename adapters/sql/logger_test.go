package sql_test

import (
	"context"
	"crypto/rand"
	"log/slog"
	"testing"
	"time"

	"github.com/locker-go/locker"
	lsql "github.com/locker-go/locker/adapters/sql"
	"github.com/locker-go/locker/internal/testenv"
)

// WithLogger reaches the driver: Postgres's LISTEN connection terminated
// (as an operator or a failover does) is logged, and so is its return
// (Info); the waiter behind it goes on to take the key.
func TestLogsPostgresListener(t *testing.T) {
	t.Parallel()
	u := testenv.URL(t, "LOCKER_TEST_POSTGRES")
	lu, app := lsql.WithApp(u, "locker-logs-")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lg, logs := testenv.NewLogs()
	l, err := locker.Open(ctx, lu, locker.WithLogger(lg))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other := open(t, u.String())
	defer other.Close()

	key := "logs-" + rand.Text()
	held, err := other.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := testenv.LockInTurn(ctx, l, key)
	admin := openDB(t, "pgx", u.String())
	for { // until the waiter's LISTEN connection is up
		var n int
		if err := admin.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN %'`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no LISTEN connection")
		case <-time.After(5 * time.Millisecond): // polling a condition: pg_stat_activity has no watch
		}
	}
	if _, err := admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app); err != nil {
		t.Fatal(err)
	}
	logs.Wait(t, 10*time.Second, slog.LevelInfo, "LISTEN connection was lost")
	logs.Wait(t, 10*time.Second, slog.LevelInfo, "LISTEN connection is up again")
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Errorf("the waiter: %v", err)
	}
}
