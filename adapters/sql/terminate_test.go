package sql_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// Postgres terminates the holder's connections (pg_terminate_backend, as
// an operator or a failover does): the lease survives on new connections,
// nobody else gets the key meanwhile, and Unlock then frees it.
func TestPostgresBackendTerminated(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_POSTGRES")
	app := "locker-terminate-" + strings.ToLower(rand.Text()[:8])
	q := u.Query()
	q.Set("application_name", app) // so that only this Locker's connections are cut
	hu := *u
	hu.RawQuery = q.Encode()
	holder, other := open(t, hu.String()), open(t, u.String())
	defer holder.Close()
	defer other.Close()
	admin := openDB(t, "pgx", u.String())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := "terminate-" + rand.Text()
	const ttl = time.Second
	lease, err := holder.Lock(ctx, key, locker.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // over three TTLs, cut every connection of the holder's each time
		var cut int
		if err := admin.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&cut); err != nil {
			t.Fatal(err)
		}
		if cut == 0 {
			t.Fatal("no connection of the holder's to terminate")
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
