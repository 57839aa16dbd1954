package sql

import (
	"crypto/rand"
	"testing"
	"time"
)

// A key whose release left it to another process's waiter is hot: the
// next Lock for it here queues from its first attempt, with no claim
// first (one attempt before it parks, where a claim and then a place take
// two). A Lock that finds it free with nobody ahead takes it, and it
// cools.
func TestMySQLHotKeyQueuesBeforeItClaims(t *testing.T) {
	ctx := t.Context()
	ls := parkingProcesses(t, 3)
	a, b, c := ls[0], ls[1], ls[2]
	db, dc := driverOf(b), driverOf(c)
	key := "hot-" + rand.Text()
	held, err := a.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	gotB := lockAsync(ctx, t, b, key)
	waitFor(t, "b parks", func() bool { return db.gates.parked(t, key) })
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	leaseB := <-gotB
	if leaseB == nil {
		t.FailNow()
	}
	gotC := lockAsync(ctx, t, c, key)
	waitFor(t, "c parks", func() bool { return dc.gates.parked(t, key) })
	if db.gates.isHot(key, time.Hour) {
		t.Fatal("the key is hot before b's release")
	}
	if err := leaseB.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	leaseC := <-gotC
	if leaseC == nil {
		t.FailNow()
	}
	if !db.gates.isHot(key, time.Hour) {
		t.Fatal("b's release left the key to c, and it is not hot in b's process")
	}

	attempts := countAttempts(db)
	gotB = lockAsync(ctx, t, b, key)
	waitFor(t, "b parks again", func() bool { return db.gates.parked(t, key) })
	if n := attempts.Load(); n != 1 {
		t.Errorf("b made %d attempts before it parked, want 1 (its place, with no claim)", n)
	}
	if err := leaseC.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if leaseB = <-gotB; leaseB == nil {
		t.FailNow()
	}
	if err := leaseB.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	attempts.Store(0)
	lease, err := b.Lock(ctx, key) // hot still (b waited), but free
	if err != nil {
		t.Fatal(err)
	}
	if n := attempts.Load(); n != 1 || db.gates.isHot(key, time.Hour) {
		t.Errorf("a Lock of a free hot key made %d attempts (want 1), and the key is hot: %v", n, db.gates.isHot(key, time.Hour))
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
