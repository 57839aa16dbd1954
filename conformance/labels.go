package conformance

import (
	"errors"
	"fmt"
	"strings"

	"github.com/locker-go/locker"
)

// checkLabels: a label given with WithLabel comes back in Status and List
// (each shared holder's its own, a subtree lock's too), the lease's
// Owner stays the owner, re-entry with the same owner and label is one
// holder, and a bad label is ErrInvalidOwner, taking nothing.
func checkLabels(e *env) error {
	ls, err := e.clientsN(2)
	if err != nil {
		return err
	}
	adm, ok := ls[1].(locker.Admin)
	if !ok {
		return skip("this Locker does not implement locker.Admin")
	}
	p := e.prefix
	const label = "alice@build-3 pid 4121: make release"
	held, err := e.lock(ls[0], p+"x", locker.WithLabel(label), locker.WithOwner("alice"))
	if err != nil {
		return err
	}
	again, err := e.lock(ls[0], p+"x", locker.WithLabel(label), locker.WithOwner("alice"))
	if err != nil {
		return fmt.Errorf("re-entry with the same owner and label: %w", err)
	}
	info, err := adm.Status(e.ctx, p+"x")
	// (Holds counts re-entries where the backend records them; some count
	// them in the holder's process only.)
	if err != nil || info.Label != label || info.Owner != "alice" || held.Owner() != "alice" || again.Fence() != held.Fence() ||
		len(info.Holders) != 1 || info.Holders[0].Label != label {
		e.errorf("Status of a labelled key = %+v, %v; want one holder, owner alice, label %q (lease owner %q, fences %d %d)",
			info, err, label, held.Owner(), held.Fence(), again.Fence())
	}
	if list, err := adm.List(e.ctx, p+"x"); err != nil || len(list) != 1 || list[0].Label != label {
		e.errorf("List = %+v, %v; want the label", list, err)
	}
	if err := e.labelsShared(ls, adm); err != nil {
		return err
	}
	e.badLabels(ls[0], adm)
	for _, l := range []locker.Lease{again, held} {
		if err := e.unlock(l); err != nil {
			return err
		}
	}
	return nil
}

// labelsShared: each shared holder with its own label, or none, and a
// subtree lock's label.
func (e *env) labelsShared(ls []locker.Locker, adm locker.Admin) error {
	if e.h.NoModes {
		return nil
	}
	p := e.prefix
	r1, err := e.tryLock(ls[0], p+"s", locker.Shared(), locker.WithLabel("reader one"))
	if err != nil {
		return err
	}
	r2, err := e.tryLock(ls[1], p+"s", locker.Shared())
	if err != nil {
		return err
	}
	info, err := adm.Status(e.ctx, p+"s")
	if err != nil || len(info.Holders) != 2 || info.Holders[0].Label != "reader one" || info.Holders[1].Label != "" ||
		info.Holders[1].Owner != r2.Owner() {
		e.errorf("Status of a key held shared = %+v, %v; want the first holder labelled, the second not", info, err)
	}
	tree, err := e.tryLock(ls[0], p+"t/a/b", locker.Subtree(), locker.WithLabel("tree job"))
	if err != nil {
		return err
	}
	if info, err := adm.Status(e.ctx, p+"t/a/b", locker.Subtree()); err != nil || info.Label != "tree job" {
		e.errorf("Status of a labelled subtree lock = %+v, %v", info, err)
	}
	for _, l := range []locker.Lease{r1, r2, tree} {
		if err := e.unlock(l); err != nil {
			return err
		}
	}
	return nil
}

// badLabels: too long, a NUL, the separator, or an owner and label over
// MaxKeyLen together: ErrInvalidOwner, and the key stays free.
func (e *env) badLabels(l locker.Locker, adm locker.Admin) {
	key := e.prefix + "bad"
	for _, opts := range [][]locker.Option{
		{locker.WithLabel(strings.Repeat("x", locker.MaxLabelLen+1))},
		{locker.WithLabel("a\x00b")},
		{locker.WithLabel("a\x1fb")},
		{locker.WithOwner("a\x1fb")},
		{locker.WithOwner(strings.Repeat("o", locker.MaxKeyLen-10)), locker.WithLabel("twenty bytes of text")},
	} {
		if _, err := l.TryLock(e.ctx, key, opts...); !errors.Is(err, locker.ErrInvalidOwner) {
			e.errorf("TryLock with a bad label or owner = %v, want ErrInvalidOwner", err)
		}
	}
	if _, err := adm.Status(e.ctx, key); !errors.Is(err, locker.ErrNotHeld) {
		e.errorf("Status after refused labels = %v, want ErrNotHeld", err)
	}
}
