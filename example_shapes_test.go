package locker_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/locker-go/locker"
)

// Readers share a key; a writer waits for them, and readers that come
// after a waiting writer wait behind it.
func ExampleShared() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "mem://shared-example")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	r1, _ := l.Lock(ctx, "config", locker.Shared())
	r2, _ := l.Lock(ctx, "config", locker.Shared()) // another reader, at once
	fmt.Println("readers:", r1.Fence() < r2.Fence())

	_, err = l.TryLock(ctx, "config") // a writer is refused while they read
	fmt.Println("writer refused:", errors.Is(err, locker.ErrLocked))

	r1.Unlock(ctx)
	r2.Unlock(ctx)
	w, _ := l.TryLock(ctx, "config")
	fmt.Println("writer after them:", w.Fence() > r2.Fence())
	w.Unlock(ctx)
	// Output:
	// readers: true
	// writer refused: true
	// writer after them: true
}

// A subtree lock covers its path and every path below it, compared by
// segments: "projects/a" meets "projects/a/docs", never "projects/ab".
func ExampleSubtree() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "mem://subtree-example")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	lease, err := l.Lock(ctx, "projects/a", locker.Subtree())
	if err != nil {
		log.Fatal(err)
	}
	for _, path := range []string{"projects/a/docs", "projects", "projects/ab"} {
		other, err := l.TryLock(ctx, path, locker.Subtree())
		if err == nil {
			other.Unlock(ctx)
		}
		fmt.Printf("%s: %v\n", path, errors.Is(err, locker.ErrLocked))
	}
	lease.Unlock(ctx)
	// Output:
	// projects/a/docs: true
	// projects: true
	// projects/ab: false
}

// LockAll takes several keys, all or none, in an order that no other
// LockAll can deadlock with.
func ExampleLockAll() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "mem://lockall-example")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	leases, err := locker.LockAll(ctx, l, []string{"account/7", "account/3"})
	if err != nil {
		log.Fatal(err)
	}
	for _, lease := range leases {
		fmt.Println("holding", lease.Key())
	}
	// Move money between the two accounts, passing each lease's Fence on.
	for _, lease := range leases {
		lease.Unlock(ctx)
	}
	// Output:
	// holding account/7
	// holding account/3
}

// At most two holders of "payments" at once: a third is refused (or, with
// Lock, waits) until one leaves.
func ExampleLimit() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "mem://limit-example")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	a, _ := l.Lock(ctx, "payments", locker.Limit(2))
	b, _ := l.Lock(ctx, "payments", locker.Limit(2))
	_, err = l.TryLock(ctx, "payments", locker.Limit(2))
	fmt.Println("third refused:", errors.Is(err, locker.ErrLocked))

	a.Unlock(ctx)
	c, _ := l.TryLock(ctx, "payments", locker.Limit(2))
	fmt.Println("third after one left, fenced above:", c.Fence() > b.Fence())
	b.Unlock(ctx)
	c.Unlock(ctx)
	// Output:
	// third refused: true
	// third after one left, fenced above: true
}
