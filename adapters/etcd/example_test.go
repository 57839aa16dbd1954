package etcd_test

import (
	"context"
	"fmt"
	"log"

	"github.com/locker-go/locker"
	_ "github.com/locker-go/locker/adapters/etcd" // registers etcd:// and etcds://
)

// Open an etcd-backed Locker by URL and run work under a lock. The address
// is the one scripts/backends serves.
func Example() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "etcd://127.0.0.1:12379/locker-example")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	lease, err := l.Lock(ctx, "reports/2026-11")
	if err != nil {
		log.Fatal(err)
	}
	// Fence is the entry's create revision: pass it to the storage you
	// write to, so that it can refuse a holder whose lease has lapsed.
	fmt.Println("holding", lease.Key(), "fenced:", lease.Fence() > 0)
	if err := lease.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", lease.Err())
	// Output:
	// holding reports/2026-11 fenced: true
	// released: locker: lease is not held
}
