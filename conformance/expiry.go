package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locker-go/locker"
)

// The checks of time: a lease lapses unless kept alive, and then only its
// new owner may act on the key.

func checkExpiryWithoutKeepAlive(e *env) error {
	key := e.prefix + "k"
	a, b, err := e.two()
	if err != nil {
		return err
	}
	ttl := e.h.ttl()
	start := time.Now()
	old, err := e.tryLock(a, key, locker.WithTTL(ttl), locker.WithKeepAlive(false))
	if err != nil {
		return err
	}
	if d := old.Deadline(); d.After(time.Now().Add(ttl)) || d.Before(start) {
		e.errorf("Deadline %v after the call began is not within its TTL %v", d.Sub(start), ttl)
	}
	ctx, cancel := context.WithTimeout(e.ctx, ttl+slack)
	defer cancel()
	next, err := b.Lock(ctx, key)
	if err != nil {
		return fmt.Errorf("key not free within TTL %v + %v: %w", ttl, slack, err)
	}
	if err := waitDone(old, slack); err != nil {
		return err
	}
	if err := old.Err(); !errors.Is(err, locker.ErrLeaseLost) {
		e.errorf("expired lease Err = %v, want ErrLeaseLost", err)
	}
	if next.Fence() <= old.Fence() {
		e.errorf("fence %d after expiry is not above the expired %d", next.Fence(), old.Fence())
	}
	return e.unlock(next)
}

func checkExpiryAfterCrash(e *env) error {
	if e.h.Crash == nil {
		return skip("Harness.Crash is nil: no way to crash a client")
	}
	key := e.prefix + "k"
	a, b, err := e.two()
	if err != nil {
		return err
	}
	ttl := e.h.ttl()
	old, err := e.tryLock(a, key, locker.WithTTL(ttl))
	if err != nil {
		return err
	}
	if err := e.h.Crash(e.ctx, a); err != nil {
		return fmt.Errorf("Crash: %w", err)
	}
	return e.takeOver(b, key, old, "crashed")
}

// takeOver has b take key, within the TTL and slack, from old's holder,
// which was cut off (how), and checks that the fence went up.
func (e *env) takeOver(b locker.Locker, key string, old locker.Lease, how string) error {
	ttl := e.h.ttl()
	ctx, cancel := context.WithTimeout(e.ctx, ttl+slack)
	defer cancel()
	start := time.Now()
	next, err := b.Lock(ctx, key)
	if err != nil {
		return fmt.Errorf("key of a %s holder not free within TTL %v + %v: %w", how, ttl, slack, err)
	}
	e.logf("the key of a %s holder passed on %v after its Deadline (%v after the Lock; TTL %v)",
		how, time.Since(old.Deadline()).Round(time.Millisecond), time.Since(start).Round(time.Millisecond), ttl)
	if next.Fence() <= old.Fence() {
		e.errorf("fence %d after the %s holder is not above its %d", next.Fence(), how, old.Fence())
	}
	return e.unlock(next)
}

// lateAllowance is how late after its Deadline a lease's Done may be
// seen closing on a loaded machine: its timer fires at the Deadline.
const lateAllowance = 250 * time.Millisecond

// A holder whose backend stops answering (connection open, packets
// dropped) sees Done close by its Deadline, by the local clock, so work
// that stops at Done never overlaps the next owner; once the network
// heals, the key is free within the TTL and its fence has gone up.
func checkDoneByDeadlineWhileHung(e *env) error {
	if e.h.Hang == nil {
		return skip("Harness.Hang is nil: no way to make the backend hang")
	}
	key := e.prefix + "k"
	a, b, err := e.two()
	if err != nil {
		return err
	}
	ttl := e.h.ttl()
	old, err := e.lock(a, key, locker.WithTTL(ttl))
	if err != nil {
		return err
	}
	heal, err := e.h.Hang(e.ctx, a)
	if err != nil {
		return fmt.Errorf("Hang: %w", err)
	}
	err = waitDone(old, ttl+slack)
	heal()
	if err != nil {
		return fmt.Errorf("while the backend hung: %w", err)
	}
	late := time.Since(old.Deadline())
	e.logf("Done closed %v after the Deadline while the backend hung (negative: before)", late.Round(time.Millisecond))
	if late > lateAllowance {
		e.errorf("Done closed %v after the Deadline while the backend hung", late)
	}
	if err := old.Err(); !errors.Is(err, locker.ErrLeaseLost) {
		e.errorf("hung holder's Err = %v, want ErrLeaseLost", err)
	}
	return e.takeOver(b, key, old, "hung (then healed)")
}

func checkOwnerOnlyRelease(e *env) error {
	key := e.prefix + "k"
	ls, err := e.clientsN(3)
	if err != nil {
		return err
	}
	a, b, c := ls[0], ls[1], ls[2]
	old, err := e.tryLock(a, key, locker.WithTTL(e.h.ttl()), locker.WithKeepAlive(false))
	if err != nil {
		return err
	}
	if err := waitDone(old, e.h.ttl()+slack); err != nil {
		return err
	}
	next, err := e.lock(b, key)
	if err != nil {
		return err
	}
	if err := old.Unlock(e.ctx); !errors.Is(err, locker.ErrNotHeld) {
		e.errorf("Unlock of an expired, taken-over lease = %v, want ErrNotHeld", err)
	}
	if err := old.Refresh(e.ctx); !errors.Is(err, locker.ErrNotHeld) {
		e.errorf("Refresh of an expired, taken-over lease = %v, want ErrNotHeld", err)
	}
	if _, err := c.TryLock(e.ctx, key); !errors.Is(err, locker.ErrLocked) {
		e.errorf("the new owner lost the key to the old one's Unlock: TryLock = %v", err)
	}
	if err := next.Refresh(e.ctx); err != nil {
		e.errorf("new owner's Refresh = %v", err)
	}
	if err := next.Err(); err != nil {
		e.errorf("new owner's Err = %v", err)
	}
	return e.unlock(next)
}

func checkKeepAlive(e *env) error {
	key := e.prefix + "k"
	a, b, err := e.two()
	if err != nil {
		return err
	}
	ttl := e.h.ttl()
	held, err := e.lock(a, key, locker.WithTTL(ttl))
	if err != nil {
		return err
	}
	end := time.Now().Add(3 * ttl)
	tick := time.NewTicker(ttl / 4)
	defer tick.Stop()
	refused := 0 // probes that found the key held after its first TTL
	for time.Now().Before(end) {
		<-tick.C
		lease, err := b.TryLock(e.ctx, key)
		switch {
		case errors.Is(err, locker.ErrLocked):
			if time.Until(end) < 2*ttl {
				refused++
			}
		case errors.Is(err, locker.ErrUnavailable) && lease == nil:
			// A slow backend (a loaded CI machine) answers the prober
			// late: that proves nothing either way, and takes nothing.
			e.logf("KeepAlive: a probe at %v of 3×TTL: %v", time.Until(end), err)
		default:
			// Whether the holder's lease had ended (lost: its Done closed
			// first, as the contract asks, on a machine too starved to
			// renew) or not (two holders) tells the two failures apart.
			return fmt.Errorf("kept-alive key taken at %v of 3×TTL (TryLock: %v; the holder's lease: Err %v, Deadline in %v)",
				time.Until(end), err, held.Err(), time.Until(held.Deadline()))
		}
	}
	if refused == 0 {
		return fmt.Errorf("no probe after the first TTL found the key held (every one failed)")
	}
	select {
	case <-held.Done():
		return fmt.Errorf("kept-alive lease ended: %v", held.Err())
	default:
	}
	if !held.Deadline().After(time.Now()) {
		e.errorf("kept-alive lease's Deadline %v is in the past", held.Deadline())
	}
	return e.unlock(held)
}

func checkRefreshMovesDeadline(e *env) error {
	key := e.prefix + "k"
	a, err := e.client()
	if err != nil {
		return err
	}
	held, err := e.tryLock(a, key, locker.WithKeepAlive(false))
	if err != nil {
		return err
	}
	before := held.Deadline()
	if err := held.Refresh(e.ctx); err != nil {
		return fmt.Errorf("Refresh: %w", err)
	}
	if after := held.Deadline(); !after.After(before) {
		e.errorf("Deadline after Refresh %v is not after %v", after, before)
	}
	return e.unlock(held)
}
