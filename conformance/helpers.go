package conformance

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/locker-go/locker"
)

// The helpers below return an error that names the call, for a check to
// end with: a step it cannot go on without failed.

// lockTimeout bounds a Lock that should succeed, so that a holder that
// never lets go fails the check with the key's name.
const lockTimeout = 30 * time.Second

func (e *env) lock(l locker.Locker, key string, opts ...locker.Option) (locker.Lease, error) {
	ctx, cancel := context.WithTimeout(e.ctx, lockTimeout)
	defer cancel()
	lease, err := l.Lock(ctx, key, opts...)
	if err != nil {
		return nil, fmt.Errorf("Lock(%q): %w", key, err)
	}
	return lease, nil
}

func (e *env) tryLock(l locker.Locker, key string, opts ...locker.Option) (locker.Lease, error) {
	lease, err := l.TryLock(e.ctx, key, opts...)
	if err != nil {
		return nil, fmt.Errorf("TryLock(%q): %w", key, err)
	}
	return lease, nil
}

func (e *env) unlock(lease locker.Lease) error {
	if err := lease.Unlock(e.ctx); err != nil {
		return fmt.Errorf("Unlock(%q): %w", lease.Key(), err)
	}
	return nil
}

// tryUnlock takes key with TryLock and releases it: the key is free.
func (e *env) tryUnlock(l locker.Locker, key string, opts ...locker.Option) error {
	lease, err := e.tryLock(l, key, opts...)
	if err != nil {
		return err
	}
	return e.unlock(lease)
}

// count is h.Count on the check's context.
func (e *env) count(prefix string) (int, error) {
	n, err := e.h.Count(e.ctx, prefix)
	if err != nil {
		return 0, fmt.Errorf("Count(%q): %w", prefix, err)
	}
	return n, nil
}

// countIs reports whether h.Count for prefix is want, for eventually.
func (e *env) countIs(prefix string, want int) func() (bool, error) {
	return func() (bool, error) {
		n, err := e.count(prefix)
		return n == want, err
	}
}

// waitDone waits for the lease to end within d.
func waitDone(lease locker.Lease, d time.Duration) error {
	select {
	case <-lease.Done():
		return nil
	case <-time.After(d):
		deadline := lease.Deadline()
		return fmt.Errorf("lease on %q still not done after %v, %v after its deadline %v",
			lease.Key(), d, time.Since(deadline).Round(time.Millisecond), deadline)
	}
}

// eventually polls cond, a check of backend state that offers no
// notification, until it holds or d passes; an error of cond ends it.
func eventually(d time.Duration, what string, cond func() (bool, error)) error {
	end := time.Now().Add(d)
	for {
		ok, err := cond()
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		case time.Now().After(end):
			return fmt.Errorf("after %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// calls are a Locker's two ways to take a key, for checks that expect
// both to answer alike.
func calls(l locker.Locker) map[string]func(context.Context, string, ...locker.Option) (locker.Lease, error) {
	return map[string]func(context.Context, string, ...locker.Option) (locker.Lease, error){
		"Lock": l.Lock, "TryLock": l.TryLock,
	}
}

// trimmed is key without the check's prefix, for messages.
func (e *env) trimmed(key string) string { return strings.TrimPrefix(key, e.prefix) }
