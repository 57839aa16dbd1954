package sql

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

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

// A Lock of a free key claims it through the claim's procedure, which
// draws one fence and gives it; a TryLock of the held key is refused (the
// call's duplicate key) with the procedure in use; and a procedure that
// fails every call fails a TryLock of a free key with its message.
func TestMySQLClaimByProcedure(t *testing.T) {
	t.Parallel()
	l, d, table := myClaimOpen(t, "claim_proc")
	ctx := t.Context()
	key := "claim-proc-" + rand.Text()
	counter := func() uint64 {
		var v uint64
		if err := d.db.QueryRowContext(ctx, "SELECT v FROM `"+table+"_fence` WHERE id = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := counter()
	first, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if after := counter(); first.Fence() != before+1 || after != before+1 {
		t.Fatalf("fence %d, counter %d -> %d: want one fence drawn, and given", first.Fence(), before, after)
	}
	if _, err := l.TryLock(ctx, key); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryLock of a held key: %v, want ErrLocked", err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if d.claimOff.Load() {
		t.Fatal("the claim procedure is off")
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
// a TryLock of the free key is refused, and granted once only a lapsed
// place is left, with a fence above the key's last.
func TestMySQLClaimPassesNoWaiter(t *testing.T) {
	t.Parallel()
	l, d, table := myClaimOpen(t, "claim_queue")
	// bounded: a claim and a look that disagree would try again at once
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
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
	if _, err := d.db.ExecContext(ctx, "UPDATE `"+table+"_queue` SET expires_at = "+myNow+" - 1000 WHERE `key` = ?", key); err != nil {
		t.Fatal(err)
	}
	after, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("TryLock with a lapsed place left: %v", err)
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

// A procedure not to be had turns its lane off; any other error does not.
func TestMyNoLane(t *testing.T) {
	for n, want := range map[uint16]bool{1305: true, 1370: true, 1449: true, 1318: true, 1062: false, 1213: false, 1644: false} {
		if got := myNoLane(fmt.Errorf("call: %w", &mysql.MySQLError{Number: n})); got != want {
			t.Errorf("myNoLane(error %d) = %v, want %v", n, got, want)
		}
	}
	if myNoLane(errors.New("1305")) {
		t.Error("myNoLane of an error that is not the server's")
	}
}
