package conformance

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/locker-go/locker"
)

// The checks of what the backend keeps: no records of released keys, and
// what the admin operations report and force.

func checkNoLeak(e *env) error {
	if e.h.Count == nil {
		return skip("Harness.Count is nil: no way to count the records left behind")
	}
	const keys, workers = 1000, 8
	p := e.prefix
	ls, err := e.clientsN(workers)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for w, l := range ls {
		wg.Go(func() {
			for i := w; i < keys; i += workers {
				lease, err := l.Lock(e.ctx, fmt.Sprintf("%s%04d", p, i))
				if err != nil {
					e.error(err)
					return
				}
				if err := lease.Unlock(e.ctx); err != nil {
					e.error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Some backends reap empty parents asynchronously (ZooKeeper containers).
	return eventually(15*time.Second, "per-key records remain after 1,000 keys were locked and unlocked",
		e.countIs(p, 0))
}

func checkAdmin(e *env) error {
	p := e.prefix
	a, b, err := e.two()
	if err != nil {
		return err
	}
	adm, ok := b.(locker.Admin)
	if !ok {
		return skip("this Locker does not implement locker.Admin")
	}
	held, err := e.lock(a, p+"k", locker.WithTTL(e.h.ttl()))
	if err != nil {
		return err
	}
	other, err := e.lock(a, p+"other")
	if err != nil {
		return err
	}
	adminReports(e, adm, held)
	if err := adm.ForceUnlock(e.ctx, p+"k"); err != nil {
		return fmt.Errorf("ForceUnlock: %w", err)
	}
	if err := waitDone(held, e.h.ttl()+slack); err != nil {
		return err
	}
	if err := held.Err(); !errors.Is(err, locker.ErrLeaseLost) {
		e.errorf("force-unlocked lease Err = %v, want ErrLeaseLost", err)
	}
	if _, err := adm.Status(e.ctx, p+"k"); !errors.Is(err, locker.ErrNotHeld) {
		e.errorf("Status of a free key = %v, want ErrNotHeld", err)
	}
	if err := adm.ForceUnlock(e.ctx, p+"k"); !errors.Is(err, locker.ErrNotHeld) {
		e.errorf("ForceUnlock of a free key = %v, want ErrNotHeld", err)
	}
	if err := e.tryUnlock(b, p+"k"); err != nil {
		return err
	}
	return e.unlock(other)
}

// adminReports expects Status and List to show held (on the check's "k")
// and the check's "other" key, both held.
func adminReports(e *env, adm locker.Admin, held locker.Lease) {
	p := e.prefix
	info, err := adm.Status(e.ctx, p+"k")
	if err != nil || info.Key != p+"k" || info.Owner != held.Owner() || info.Fence != held.Fence() || info.Holds != 1 {
		e.errorf("Status = %+v, %v; want key, owner %q, fence %d, 1 hold", info, err, held.Owner(), held.Fence())
	}
	list, err := adm.List(e.ctx, p)
	if err != nil || len(list) != 2 || list[0].Key != p+"k" || list[1].Key != p+"other" {
		e.errorf("List = %+v, %v; want the 2 held keys in order", list, err)
	}
}
