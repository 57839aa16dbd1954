package redsync

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// 400 waiters on one key over 8 Lockers, each opened as Open opens one
// (default options): every Lock gets the key and every Unlock lets it go.
// Issue 13, defect 2: with a fixed 50 ms node timeout, 60 Locks failed
// with "0 of 5 masters answered" on healthy masters, and an Unlock too.
func TestManyWaitersOnHealthyMasters(t *testing.T) {
	const lockers, waiters = 8, 400
	u := testenv.URL(t, "LOCKER_TEST_REDLOCK").String()
	ls := make([]locker.Locker, lockers)
	for i := range ls {
		l, err := locker.Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		ls[i] = l
	}
	key := uniqueKey(t, "k")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range waiters {
		wg.Go(func() {
			lease, err := ls[i%lockers].Lock(ctx, key)
			if err == nil {
				err = lease.Unlock(context.Background())
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d Lock/Unlock calls failed, e.g. %v", len(errs), waiters, errs[0])
	}
}
