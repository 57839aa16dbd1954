package locker_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
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

// A move from one backend to another in three phases: every process on
// from; then, one by one, on Migration(from, to); then, one by one, on to.
// Here both are mem lock spaces; with Open, the middle phase is the URL
// "migrate:?from=" + url.QueryEscape(fromURL) + "&to=" + url.QueryEscape(toURL).
func ExampleMigration() {
	ctx := context.Background()
	from, err := locker.Open(ctx, "mem://example-old")
	if err != nil {
		log.Fatal(err)
	}
	to, err := locker.Open(ctx, "mem://example-new")
	if err != nil {
		log.Fatal(err)
	}
	phase1, phase2, phase3 := from, locker.Migration(from, to), to

	old, err := phase1.TryLock(ctx, "invoices") // a process not yet moved
	if err != nil {
		log.Fatal(err)
	}
	_, err = phase2.TryLock(ctx, "invoices") // excluded through from
	fmt.Println("migrating while phase 1 holds:", err != nil)
	_ = old.Unlock(ctx)

	moving, err := phase2.TryLock(ctx, "invoices")
	if err != nil {
		log.Fatal(err)
	}
	_, err = phase3.TryLock(ctx, "invoices") // excluded through to
	fmt.Println("phase 3 while migrating holds:", err != nil)
	fmt.Println("fence rose:", moving.Fence() > old.Fence())
	_ = moving.Unlock(ctx)
	// Output:
	// migrating while phase 1 holds: true
	// phase 3 while migrating holds: true
	// fence rose: true
}

// A logger given to Open hears the Locker's rare events: here a lease
// that an operator forced open.
func ExampleWithLogger() {
	ctx := context.Background()
	steady := func(_ []string, a slog.Attr) slog.Attr { // the same output every run
		if a.Key == slog.TimeKey || a.Key == "fence" {
			return slog.Attr{}
		}
		return a
	}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: steady}))
	l, err := locker.Open(ctx, "mem://example-logger", locker.WithLogger(logger))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	lease, err := l.Lock(ctx, "reports/daily", locker.WithTTL(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	_ = l.(locker.Admin).ForceUnlock(ctx, "reports/daily")
	<-lease.Done()
	// Output:
	// level=WARN msg="locker: lease lost" key=reports/daily why="a renewal found its hold gone"
}
