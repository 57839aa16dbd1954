package peers

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locker-go/locker"
)

// pollEvery is how often a waiting lock-row client retries.
const pollEvery = 10 * time.Millisecond

// createLockRowTable makes the peer's table: one row per held key, with the
// owner and an expiry. (Rows never expire in this workload: they are held
// 1 ms, and keys are unique per run.)
func createLockRowTable(tb testing.TB, c *pgx.Conn) {
	_, err := c.Exec(context.Background(), `CREATE TABLE IF NOT EXISTS peers_lock_row (
		key        text PRIMARY KEY,
		owner      text NOT NULL,
		expires_at timestamptz NOT NULL)`)
	if err != nil {
		tb.Fatal(err)
	}
}

// lockRowClient is the common hand-written Postgres lock: INSERT the key's
// row (ON CONFLICT DO NOTHING), and while another owner's row is there, try
// again every 10 ms; DELETE it to unlock. Own connection per client.
func lockRowClient(tb testing.TB, u *url.URL) locker.Locker {
	c := pgConn(tb, u)
	return shim{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			owner := rand.Text()
			for {
				tag, err := c.Exec(ctx, `INSERT INTO peers_lock_row (key, owner, expires_at)
					VALUES ($1, $2, now() + $3 * interval '1 millisecond')
					ON CONFLICT (key) DO NOTHING`, key, owner, ttl.Milliseconds())
				if err != nil {
					return nil, err
				}
				if tag.RowsAffected() == 1 {
					break
				}
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(pollEvery):
				}
			}
			return func(ctx context.Context) error {
				tag, err := c.Exec(ctx, `DELETE FROM peers_lock_row WHERE key = $1 AND owner = $2`, key, owner)
				if err == nil && tag.RowsAffected() != 1 {
					err = fmt.Errorf("lock row %q: %w", key, locker.ErrNotHeld)
				}
				return err
			}, nil
		},
		close: func() error { return nil }, // pgConn's cleanup closes the connection
	}
}

// advisoryLockClient is Postgres's own blocking lock: pg_advisory_lock on
// the client's connection, the key hashed to its 64-bit id, and
// pg_advisory_unlock. The server queues its waiters and wakes the next
// itself; the lock has no TTL or fence and lasts as long as the session.
func advisoryLockClient(tb testing.TB, u *url.URL) locker.Locker {
	c := pgConn(tb, u)
	return shim{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			if _, err := c.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, key); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				var ok bool
				err := c.QueryRow(ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, key).Scan(&ok)
				if err == nil && !ok {
					err = fmt.Errorf("advisory lock %q: %w", key, locker.ErrNotHeld)
				}
				return err
			}, nil
		},
		close: func() error { return nil },
	}
}
