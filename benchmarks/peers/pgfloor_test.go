package peers

import (
	"context"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/locker-go/locker"
)

// pgRowFloorClient is a hand-off floor (floors_test.go) for a lock whose
// holder is a row of a Postgres table, with its waiters in one process:
// a release records the next holder with one autocommitted UPDATE of a
// row (the waiter's own) and wakes it in the process, where
// notifyFloorClient's waiters in processes of their own hear a NOTIFY.
// Ours hands the key to a waiter of its own process so, from its
// release's answer.
func pgRowFloorClient(tb testing.TB, u *url.URL) locker.Locker {
	c, id, granted := pgFloorConn(tb, u)
	return localFloor{id: id, granted: granted, wake: wakeLocal,
		write: func(ctx context.Context, next string) error {
			_, err := c.Exec(ctx, "UPDATE peers_floor_row SET n = n + 1 WHERE id = $1", next)
			return err
		},
	}.client()
}

// pgFencedFloorClient is pgRowFloorClient with what a fenced FIFO lock
// whose queue is in the database writes besides: a refused waiter takes
// its place before it waits (as myFencedFloorClient's), and a release, in
// one statement, draws a fence from a counter row, records it in the next
// holder's row, and deletes that waiter's place. Ours writes the same
// three rows a hand-off, and reads the queue's head besides.
func pgFencedFloorClient(tb testing.TB, u *url.URL) locker.Locker {
	c, id, granted := pgFloorConn(tb, u)
	return localFloor{id: id, granted: granted, wake: wakeLocal,
		place: func(ctx context.Context) error {
			_, err := c.Exec(ctx, "INSERT INTO peers_floor_place (id) VALUES ($1) ON CONFLICT DO NOTHING", id)
			return err
		},
		write: func(ctx context.Context, next string) error {
			_, err := c.Exec(ctx, `WITH f AS (UPDATE peers_floor_fence SET v = v + 1 WHERE id = 1 RETURNING v),
				p AS (DELETE FROM peers_floor_place WHERE id = $1)
				UPDATE peers_floor_row SET n = (SELECT v FROM f) WHERE id = $1`, next)
			return err
		},
	}.client()
}

// pgFloorConn is a Postgres floor client's connection, with the floors'
// tables made, and its id (its row made) and wake-up (localWaiter).
func pgFloorConn(tb testing.TB, u *url.URL) (*pgx.Conn, string, <-chan struct{}) {
	c := pgConn(tb, u)
	ctx := context.Background()
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS peers_floor_row (id text PRIMARY KEY, n bigint NOT NULL)",
		"CREATE TABLE IF NOT EXISTS peers_floor_place (id text PRIMARY KEY)",
		"CREATE TABLE IF NOT EXISTS peers_floor_fence (id int PRIMARY KEY, v bigint NOT NULL)",
		"INSERT INTO peers_floor_fence (id, v) VALUES (1, 0) ON CONFLICT DO NOTHING",
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			tb.Fatal(err)
		}
	}
	id, granted := localWaiter(tb)
	if _, err := c.Exec(ctx, "INSERT INTO peers_floor_row (id, n) VALUES ($1, 0)", id); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _, _ = c.Exec(context.Background(), "DELETE FROM peers_floor_row WHERE id = $1", id) })
	return c, id, granted
}
