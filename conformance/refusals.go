package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/locker-go/locker"
)

// The checks of what the contract refuses: bad input, and any use of a
// Locker after Close.

func checkInvalidInput(e *env) error {
	p := e.prefix
	a, err := e.client()
	if err != nil {
		return err
	}
	keys := map[string]string{
		"empty":        "",
		"513 bytes":    p + strings.Repeat("k", 513-len(p)),
		"invalid utf8": p + "\xff\xfe",
		"NUL":          p + "a\x00b",
	}
	for name, key := range keys {
		for op, call := range calls(a) {
			if lease, err := call(e.ctx, key); !errors.Is(err, locker.ErrInvalidKey) {
				e.errorf("%s with %s key = %v, %v; want ErrInvalidKey", op, name, lease, err)
			}
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second, locker.MaxTTL + time.Nanosecond} {
		for op, call := range calls(a) {
			if lease, err := call(e.ctx, p+"k", locker.WithTTL(ttl)); !errors.Is(err, locker.ErrInvalidTTL) {
				e.errorf("%s with TTL %v = %v, %v; want ErrInvalidTTL", op, ttl, lease, err)
			}
		}
	}
	if _, err := a.TryLock(e.ctx, p+"k", locker.WithOwner("")); !errors.Is(err, locker.ErrInvalidOwner) {
		e.errorf("TryLock with an empty owner = %v, want ErrInvalidOwner", err)
	}
	if e.h.Count != nil { // else this part goes unchecked: see Harness.Count
		n, err := e.count(p)
		if err != nil {
			return err
		}
		if n != 0 {
			e.errorf("bad input left %d records in the backend", n)
		}
	}
	longest := p + strings.Repeat("k", locker.MaxKeyLen-len(p))
	return e.tryUnlock(a, longest)
}

func checkClosed(e *env) error {
	key := e.prefix + "k"
	a, b, err := e.two()
	if err != nil {
		return err
	}
	lease, err := e.tryLock(a, key)
	if err != nil {
		return err
	}
	if err := a.Close(); err != nil {
		return fmt.Errorf("Close: %w", err)
	}
	refusedAfterClose(e, a, lease)
	if err := waitDone(lease, slack); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(e.ctx, slack)
	defer cancel()
	next, err := b.Lock(ctx, key) // Close released it; the TTL is 15s
	if err != nil {
		return fmt.Errorf("key not released by Close: %w", err)
	}
	return e.unlock(next)
}

// refusedAfterClose expects every call on the closed Locker a, and on its
// lease, to fail with ErrClosed.
func refusedAfterClose(e *env, a locker.Locker, lease locker.Lease) {
	key := lease.Key()
	for op, call := range calls(a) {
		if _, err := call(e.ctx, key+"2"); !errors.Is(err, locker.ErrClosed) {
			e.errorf("%s after Close = %v, want ErrClosed", op, err)
		}
	}
	if err := a.Close(); !errors.Is(err, locker.ErrClosed) {
		e.errorf("second Close = %v, want ErrClosed", err)
	}
	if err := lease.Unlock(e.ctx); !errors.Is(err, locker.ErrClosed) {
		e.errorf("Unlock after Close = %v, want ErrClosed", err)
	}
	if err := lease.Refresh(e.ctx); !errors.Is(err, locker.ErrClosed) {
		e.errorf("Refresh after Close = %v, want ErrClosed", err)
	}
	adm, ok := a.(locker.Admin)
	if !ok {
		return
	}
	if _, err := adm.Status(e.ctx, key); !errors.Is(err, locker.ErrClosed) {
		e.errorf("Status after Close = %v, want ErrClosed", err)
	}
	if _, err := adm.List(e.ctx, key); !errors.Is(err, locker.ErrClosed) {
		e.errorf("List after Close = %v, want ErrClosed", err)
	}
	if err := adm.ForceUnlock(e.ctx, key); !errors.Is(err, locker.ErrClosed) {
		e.errorf("ForceUnlock after Close = %v, want ErrClosed", err)
	}
}
