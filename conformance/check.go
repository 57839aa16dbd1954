package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/locker-go/locker"
)

// Check is one check of the contract.
type Check struct {
	// Name is the check's name, a Go identifier such as "MutualExclusion":
	// Run's subtest name and the last element of its keys' prefix.
	Name string
	// Run performs the check against the backend h drives: nil if it
	// passed, a *SkipError if it could not run (errors.As finds it), else
	// every failure it saw, joined. Its keys begin with h.Prefix + Name + "/",
	// and it closes every Locker it made before it returns. It gives up
	// after two minutes, or when ctx ends.
	Run func(ctx context.Context, h Harness) error
	// Alone says the check loads the backend enough (50 contenders) to
	// starve checks run beside it: Run and locker check run it by itself,
	// before the others, which run together.
	Alone bool
}

// SkipError is a check's answer when it could not run: the harness or the
// Locker lacks what it needs. Reason says what.
type SkipError struct {
	Reason string
}

// Error says the check was skipped, and why.
func (e *SkipError) Error() string { return "skipped: " + e.Reason }

func skip(reason string) error { return &SkipError{Reason: reason} }

// Checks returns the suite's checks, in the order they are reported. Each
// call returns a new slice.
func Checks() []Check {
	return []Check{
		check("MutualExclusion", checkMutualExclusion),
		check("Linearizable", checkLinearizable),
		check("TryLockHeld", checkTryLockHeld),
		check("IndependentKeys", checkIndependentKeys),
		check("OpaqueKeys", checkOpaqueKeys),
		check("ExpiryWithoutKeepAlive", checkExpiryWithoutKeepAlive),
		check("ExpiryAfterCrash", checkExpiryAfterCrash),
		check("NoGrantBeforeDeadline", checkNoGrantBeforeDeadline),
		check("DoneByDeadlineWhileHung", checkDoneByDeadlineWhileHung),
		check("FaultsUnderContention", checkFaultsUnderContention),
		check("OwnerOnlyRelease", checkOwnerOnlyRelease),
		check("KeepAlive", checkKeepAlive),
		check("ManyLeases", checkManyLeases),
		check("RefreshMovesDeadline", checkRefreshMovesDeadline),
		check("Reentry", checkReentry),
		check("Cancellation", checkCancellation),
		check("Handoff", checkHandoff),
		check("FIFO", checkFIFO),
		check("InvalidInput", checkInvalidInput),
		check("DoubleUnlock", checkDoubleUnlock),
		check("Closed", checkClosed),
		check("CloseWakesWaiters", checkCloseWakesWaiters),
		check("NoLeak", checkNoLeak),
		check("Do", checkDo),
		check("DoLeaseLost", checkDoLeaseLost),
		check("Admin", checkAdmin),
		check("Labels", checkLabels),
		check("Shared", checkShared),
		check("WriterNotStarved", checkWriterNotStarved),
		check("SharedReentry", checkSharedReentry),
		check("SharedExpiry", checkSharedExpiry),
		check("SharedExclusion", checkSharedExclusion),
		check("SubtreePaths", checkSubtreePaths),
		check("SubtreeShared", checkSubtreeShared),
		check("SubtreeHandoff", checkSubtreeHandoff),
		check("SubtreeExclusion", checkSubtreeExclusion),
		check("LockAllNoDeadlock", checkLockAllNoDeadlock),
		check("LockAllAtomic", checkLockAllAtomic),
		check("FenceFloor", checkFenceFloor),
		check("ElectionOneLeader", checkElectionOneLeader),
		check("ElectionObserve", checkElectionObserve),
		check("ElectionLeaderCrash", checkElectionLeaderCrash),
		check("Limit", checkLimit),
		alone(check("LimitContention", checkLimitContention)),
		check("LimitAfterCrash", checkLimitAfterCrash),
		check("LimitFaults", checkLimitFaults),
	}
}

// alone marks c to run by itself (Check.Alone).
func alone(c Check) Check {
	c.Alone = true
	return c
}

// checkTimeout bounds one check well past anything it should need, so a
// hang fails the check instead of the whole run.
const checkTimeout = 2 * time.Minute

// check makes fn a Check: it gives fn an env of its own and closes the
// clients fn made when it returns.
func check(name string, fn func(e *env) error) Check {
	return Check{Name: name, Run: func(ctx context.Context, h Harness) error {
		if h.NewLocker == nil {
			return errors.New("conformance: Harness.NewLocker is nil")
		}
		ctx, cancel := context.WithTimeout(ctx, checkTimeout)
		defer cancel()
		e := &env{ctx: ctx, h: h, prefix: h.prefix() + name + "/"}
		defer e.closeClients()
		return e.result(fn(e))
	}}
}

// env is one run of one check: its context and harness, the prefix of its
// keys, the clients it made and the failures it reported on the way (as
// t.Errorf would: the check goes on).
type env struct {
	ctx    context.Context
	h      Harness
	prefix string

	mu      sync.Mutex
	clients []locker.Locker
	errs    []error
}

// errorf records a failure and lets the check go on; safe for concurrent use.
func (e *env) errorf(format string, args ...any) { e.error(fmt.Errorf(format, args...)) }

// logf hands a measured figure to the harness's Log, if any.
func (e *env) logf(format string, args ...any) {
	if e.h.Log != nil {
		e.h.Log(format, args...)
	}
}

func (e *env) error(err error) {
	e.mu.Lock()
	e.errs = append(e.errs, err)
	e.mu.Unlock()
}

// result is the check's error: the failures recorded on the way and the
// one it ended with, if any. A skip counts only if nothing failed before.
func (e *env) result(end error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.errs) == 0 {
		return end
	}
	var s *SkipError
	if errors.As(end, &s) {
		end = nil
	}
	return errors.Join(append(e.errs, end)...)
}

// client makes a Locker that is closed when the check ends.
func (e *env) client() (locker.Locker, error) {
	l, err := e.h.NewLocker(e.ctx)
	if err != nil {
		return nil, fmt.Errorf("NewLocker: %w", err)
	}
	e.mu.Lock()
	e.clients = append(e.clients, l)
	e.mu.Unlock()
	return l, nil
}

// clientsN makes n clients, each its own Locker.
func (e *env) clientsN(n int) ([]locker.Locker, error) {
	ls := make([]locker.Locker, n)
	for i := range ls {
		var err error
		if ls[i], err = e.client(); err != nil {
			return nil, err
		}
	}
	return ls, nil
}

// two makes the two clients most checks use.
func (e *env) two() (a, b locker.Locker, err error) {
	ls, err := e.clientsN(2)
	if err != nil {
		return nil, nil, err
	}
	return ls[0], ls[1], nil
}

// closeClients closes the check's clients, at once: a crashed client's
// Close may wait out a timeout. Those the check closed itself answer
// ErrClosed, which is no news.
func (e *env) closeClients() {
	e.mu.Lock()
	clients := e.clients
	e.clients = nil
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range clients {
		wg.Go(func() { _ = l.Close() })
	}
	wg.Wait()
}
