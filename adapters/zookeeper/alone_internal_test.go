package zookeeper

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// waitArmed waits until h's node is watched.
func waitArmed(t *testing.T, z *zkDriver, h *hold) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		z.mu.Lock()
		armed := h.armed
		z.mu.Unlock()
		if armed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the hold's node is not watched 10 s after its grant")
		}
	}
}

// onlyHold returns z's one hold.
func onlyHold(t *testing.T, z *zkDriver) *hold {
	t.Helper()
	z.mu.Lock()
	defer z.mu.Unlock()
	if len(z.holds) != 1 {
		t.Fatalf("%d holds, want 1", len(z.holds))
	}
	for h := range z.holds {
		return h
	}
	return nil
}

// deleteNode deletes h's node as another client would (ForceUnlock).
func deleteNode(t *testing.T, z *zkDriver, h *hold) {
	t.Helper()
	if err := z.primary.conn.Delete(h.path, -1); err != nil {
		t.Fatal(err)
	}
}

// A hold granted by the multi sets its node's watch after armDelay, and
// its deletion by another then ends it, lost: with a renewal minutes away
// (armDelay short, the TTL long), only the watch can tell.
func TestAloneHoldWatchedAfterDelay(t *testing.T) {
	z := openZ(t, testenv.URL(t, "LOCKER_TEST_ZK"))
	ctx := context.Background()
	held, err := z.Lock(ctx, t.Name(), locker.WithTTL(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	h := onlyHold(t, z.zkDriver)
	waitArmed(t, z.zkDriver, h)
	deleteNode(t, z.zkDriver, h)
	select {
	case <-held.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a lease whose watched node was deleted did not end")
	}
	if !errors.Is(held.Err(), locker.ErrLeaseLost) {
		t.Errorf("Err = %v, want ErrLeaseLost", held.Err())
	}
}

// Before its watch is set, a hold granted by the multi is left by
// RefreshBatch to Refresh, which sets the watch: the batch then answers
// for it, and the node's deletion reaches the hold.
func TestAloneHoldWatchedByItsRefresh(t *testing.T) {
	z := openZ(t, testenv.URL(t, "LOCKER_TEST_ZK"))
	z.armDelay = time.Hour // before any hold
	ctx := context.Background()
	held, err := z.Lock(ctx, t.Name(), locker.WithTTL(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	o := &leaseOps{z: z.zkDriver, h: onlyHold(t, z.zkDriver), ttl: 10 * time.Minute, keepAlive: true}
	out, err := z.RefreshBatch(ctx, []driver.Hold{o})
	if err != nil || !errors.Is(out[0].Err, driver.ErrSkip) {
		t.Fatalf("RefreshBatch of a hold not watched = %+v, %v; want ErrSkip", out, err)
	}
	if _, err := o.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	out, err = z.RefreshBatch(ctx, []driver.Hold{o})
	if err != nil || out[0].Err != nil || out[0].Valid <= 0 {
		t.Fatalf("RefreshBatch after Refresh = %+v, %v; want valid", out, err)
	}
	deleteNode(t, z.zkDriver, o.h)
	select {
	case <-held.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a lease whose node, watched since its refresh, was deleted did not end")
	}
}
