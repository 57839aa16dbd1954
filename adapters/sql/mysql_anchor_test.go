package sql

import (
	"crypto/rand"
	dbsql "database/sql"
	"fmt"
	"testing"
)

// A park whose anchor's connection dies (killed here; a server's
// wait_timeout would do the same) gets the anchor's name at once: it lets
// the name go, the waiter looks, is refused, and parks again behind a new
// anchor, with no wake counted; the release then wakes it as usual.
func TestMySQLParkOutlivesItsAnchor(t *testing.T) {
	ctx := t.Context()
	ls := parkingProcesses(t, 2)
	a, b := ls[0], ls[1]
	gs := driverOf(b).gates
	key := "park-anchor-" + rand.Text()
	held, err := a.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := lockAsync(ctx, t, b, key)
	waitFor(t, "b parks", func() bool { return gs.parked(t, key) })
	admin := driverOf(a).db
	old := anchorHolder(t, admin, gs.anchorName())
	if old == 0 {
		t.Fatal("b parks with nobody holding its anchor")
	}
	attempts := countAttempts(driverOf(b))
	if _, err := admin.ExecContext(ctx, fmt.Sprintf("KILL %d", old)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b parks again behind a new anchor", func() bool {
		// The park's own connection takes the name first, as the anchor's
		// dies, and lets it go: until it does, b's park has not ended, and
		// a release then would find b's waiter looking, not parked.
		now := anchorHolder(t, admin, gs.anchorName())
		return now != 0 && now != old && now != gs.parkConn(key) && gs.parked(t, key)
	})
	if n := attempts.Load(); n == 0 {
		t.Error("b's waiter did not look when its park found the anchor gone")
	}
	if n := gs.woken.Load(); n != 0 {
		t.Errorf("the anchor's loss counted as %d wakes", n)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lease := <-got
	if lease == nil {
		t.FailNow()
	}
	if n := gs.woken.Load(); n != 1 {
		t.Errorf("b's park was interrupted %d times by the release, want 1", n)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// parkConn is the id of the connection of key's park, or 0.
func (gs *gates) parkConn(key string) int64 {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g := gs.keys[key]; g != nil {
		return g.conn
	}
	return 0
}

// anchorHolder is the id of the connection that holds name, or 0.
func anchorHolder(t *testing.T, db *dbsql.DB, name string) int64 {
	var id dbsql.NullInt64
	if err := db.QueryRowContext(t.Context(), "SELECT IS_USED_LOCK(?)", name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id.Int64
}
