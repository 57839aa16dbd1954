package sql

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// myClaimOpen opens a MySQL Locker on a table of its own (its procedures
// its own), and its driver.
func myClaimOpen(t *testing.T, name string) (locker.Locker, *sqlDriver, string) {
	t.Helper()
	table := name + "_" + strings.ToLower(rand.Text()[:8])
	u := testenv.URL(t, "LOCKER_TEST_MYSQL")
	q := u.Query()
	q.Set("table", table)
	u.RawQuery = q.Encode()
	l, err := Open(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, driverOf(l), table
}

// A Lock of a free key claims it through the claim's procedure: here one
// that fails every call, so the Lock fails with its message.
func TestMySQLClaimByProcedure(t *testing.T) {
	t.Parallel()
	l, d, table := myClaimOpen(t, "claim_proc")
	ctx := t.Context()
	key := "claim-proc-" + rand.Text()
	first, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{"DROP PROCEDURE `" + table + myClaimName + "`",
		"CREATE PROCEDURE `" + table + myClaimName + "`(p_key VARBINARY(512), p_owner VARBINARY(512), p_id VARBINARY(255), p_ttl BIGINT) " +
			"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'the claim procedure ran'"} {
		if _, err := d.db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.TryLock(ctx, key); err == nil || !strings.Contains(err.Error(), "the claim procedure ran") {
		t.Fatalf("TryLock of a free key: %v, want the procedure's error", err)
	}
	if d.claimOff.Load() {
		t.Fatal("the claim procedure turned off by its own error")
	}
}

// The procedure's claim passes no live waiter: with a place in the queue,
// a TryLock of the free key is refused, and granted once the place is gone,
// with a fence above the key's last.
func TestMySQLClaimPassesNoWaiter(t *testing.T) {
	t.Parallel()
	l, d, table := myClaimOpen(t, "claim_queue")
	ctx := t.Context()
	key := "claim-queue-" + rand.Text()
	before, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := before.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.db.ExecContext(ctx, "INSERT INTO `"+table+"_queue` (`key`, token, expires_at) VALUES (?, 'waiter', "+
		myNow+" + 60000)", key); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(ctx, key); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryLock with a waiter queued: %v, want ErrLocked", err)
	}
	if _, err := d.db.ExecContext(ctx, "DELETE FROM `"+table+"_queue` WHERE `key` = ?", key); err != nil {
		t.Fatal(err)
	}
	after, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("TryLock with the queue empty: %v", err)
	}
	if after.Fence() <= before.Fence() {
		t.Fatalf("fence %d after %d: want it above", after.Fence(), before.Fence())
	}
	if err := after.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if d.claimOff.Load() {
		t.Fatal("the claim procedure is off")
	}
}

// Where the claim's procedure is not to be had (here: dropped after Open
// made it, as for a user who may not run it), claims go by their
// statements from then on, as correct; the other procedures stay in use.
func TestMySQLClaimMissing(t *testing.T) {
	t.Parallel()
	l, d, table := myClaimOpen(t, "claim_missing")
	ctx := t.Context()
	if _, err := d.db.ExecContext(ctx, "DROP PROCEDURE `"+table+myClaimName+"`"); err != nil {
		t.Fatal(err)
	}
	key := "claim-missing-" + rand.Text()
	var last uint64
	for range 2 {
		lease, err := l.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if lease.Fence() <= last {
			t.Fatalf("fence %d after %d: want it above", lease.Fence(), last)
		}
		last = lease.Fence()
		if _, err := l.TryLock(ctx, key); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("TryLock of a held key: %v, want ErrLocked", err)
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !d.claimOff.Load() || d.handOffOff.Load() || d.laneOff.Load() {
		t.Fatalf("claim off %v, hand-off off %v, fast lane off %v: want the claim's alone off",
			d.claimOff.Load(), d.handOffOff.Load(), d.laneOff.Load())
	}
}
