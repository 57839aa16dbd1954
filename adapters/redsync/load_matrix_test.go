package redsync_test

import (
	"testing"

	"github.com/locker-go/locker/internal/testenv"
)

// The fault matrix's load run: 400 waiters on one key over 8 Lockers, each
// opened as Open opens one (default options), then 64 clients over 1,000
// keys; every Lock and Unlock must succeed, fenced counters exact, history
// linearizable. Issue 13, defect 2: with a fixed 50 ms node timeout, 60
// Locks failed with "0 of 5 masters answered" on healthy masters, and an
// Unlock too; with every waiter racing every release, 114 did.
func TestLoadRedlock(t *testing.T) {
	testenv.Load(t, testenv.URL(t, "LOCKER_TEST_REDLOCK").String())
}
