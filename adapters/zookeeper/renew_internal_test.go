package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// otherHold is a hold of no ZooKeeper driver.
type otherHold struct{ driver.Hold }

// RefreshBatch answers from the holds' state without a call: each live
// hold valid for about what Refresh gives, a hold forced away (its watch
// fired) not held, and a hold of another driver declined.
func TestRefreshBatch(t *testing.T) {
	z := openZ(t, testenv.URL(t, "LOCKER_TEST_ZK"))
	ctx := context.Background()
	const ttl = 2 * time.Second
	var leases []locker.Lease
	for i := range 3 {
		l, err := z.TryLock(ctx, fmt.Sprintf("%s-%d", t.Name(), i), locker.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	z.mu.Lock()
	var ops []driver.Hold
	for h := range z.holds {
		ops = append(ops, &leaseOps{z: z.zkDriver, h: h, ttl: ttl, keepAlive: true})
	}
	z.mu.Unlock()
	if len(ops) != 3 {
		t.Fatalf("%d holds recorded, want 3", len(ops))
	}
	for _, o := range ops { // each node made alone, and watched after armDelay (alone.go)
		waitArmed(t, z.zkDriver, o.(*leaseOps).h)
	}
	if err := z.Locker.(locker.Admin).ForceUnlock(ctx, leases[0].Key()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-leases[0].Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a lease forced away did not end")
	}
	ops = append(ops, otherHold{})
	out, err := z.RefreshBatch(ctx, ops)
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for i, h := range ops[:len(ops)-1] {
		o := h.(*leaseOps)
		switch got := out[i]; {
		case errors.Is(got.Err, locker.ErrNotHeld):
			lost++
		case got.Err != nil || got.Valid <= 0 || got.Valid > o.validity():
			t.Errorf("live hold: %+v, want valid for at most %v", got, o.validity())
		}
	}
	if lost != 1 {
		t.Errorf("%d holds answered ErrNotHeld, want the one forced away", lost)
	}
	if got := out[len(ops)-1]; !errors.Is(got.Err, driver.ErrSkip) {
		t.Errorf("another driver's hold: %+v, want ErrSkip", got)
	}
}
