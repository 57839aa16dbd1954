package locker_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/locker-go/locker"
	_ "github.com/locker-go/locker/adapters/mem" // registers mem://; any other backend's URL works the same
)

func Example() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "mem://example")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	lease, err := l.Lock(ctx, "reports/daily", locker.WithTTL(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", lease.Key())

	// Another owner is refused while we hold it.
	if _, err := l.TryLock(ctx, "reports/daily"); err != nil {
		fmt.Println("TryLock:", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", lease.Err())
	// Output:
	// holding reports/daily
	// TryLock: locker: key is locked by another owner: "reports/daily"
	// released: locker: lease is not held
}

func ExampleDo() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "mem://example")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	err = locker.Do(ctx, l, "migrations", func(ctx context.Context) error {
		// ctx ends if the lease is lost, so the work stops with it.
		fmt.Println("migrating under the lock")
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// migrating under the lock
	// done: <nil>
}

func ExampleLease_Fence() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "mem://example")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	first, _ := l.Lock(ctx, "ledger")
	_ = first.Unlock(ctx)
	second, _ := l.Lock(ctx, "ledger")
	defer second.Unlock(ctx)
	// A storage layer that remembers the highest fence it has seen rejects
	// writes from the first holder from now on.
	fmt.Println(second.Fence() > first.Fence())
	// Output: true
}
