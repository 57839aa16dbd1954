package redsync

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/locker-go/locker"
)

// Admin sees both spaces: every reader of a shared key, a subtree lock on
// its path (its intention nodes are no locks of their own); ForceUnlock
// takes a key from all its readers.
func TestAdminBySpace(t *testing.T) {
	ls, _, _ := prefixedLockers(t, 2)
	a, b := ls[0], ls[1]
	adm := a.Locker.(locker.Admin)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var readers []locker.Lease
	for _, l := range []*testLocker{a, b} {
		lease, err := l.Lock(ctx, "k", locker.Shared())
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, lease)
	}
	tree, err := a.Lock(ctx, "k/x", locker.Subtree())
	if err != nil {
		t.Fatal(err)
	}
	list, err := adm.List(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(list, func(x, y locker.LockInfo) int { return int(x.Space) - int(y.Space) })
	if len(list) != 2 ||
		list[0].Key != "k" || list[0].Space != locker.SpacePlain || list[0].Mode != locker.ModeShared || len(list[0].Holders) != 2 ||
		list[1].Key != "k/x" || list[1].Space != locker.SpaceSubtree || list[1].Mode != locker.ModeExclusive || list[1].Fence != tree.Fence() {
		t.Errorf("List = %+v; want k shared by 2, and the subtree lock on k/x", list)
	}
	if info, err := adm.Status(ctx, "k", locker.Subtree()); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("Status of a subtree lock's intention node = %+v, %v; want ErrNotHeld", info, err)
	}
	if err := adm.ForceUnlock(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	for i, r := range readers {
		if err := r.Refresh(ctx); !errors.Is(err, locker.ErrNotHeld) && !errors.Is(err, locker.ErrLeaseLost) {
			t.Errorf("reader %d's Refresh after ForceUnlock = %v, want it lost", i, err)
		}
	}
	if err := tree.Unlock(ctx); err != nil {
		t.Fatalf("the subtree lock, untouched by the plain key's ForceUnlock: %v", err)
	}
}
