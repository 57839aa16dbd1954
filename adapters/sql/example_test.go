package sql_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/locker-go/locker"
	_ "github.com/locker-go/locker/adapters/sql" // registers postgres://, postgresql://, sqlite://
)

// A lock table in a SQLite file, shared by every process of the machine.
func Example() {
	dir, err := os.MkdirTemp("", "locker-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	l, err := locker.Open(ctx, "sqlite://"+filepath.ToSlash(filepath.Join(dir, "locks.db")))
	if err != nil {
		panic(err)
	}
	defer l.Close()

	err = locker.Do(ctx, l, "nightly-report", func(ctx context.Context) error {
		_, err := l.TryLock(ctx, "nightly-report")
		fmt.Println("while held:", err)
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// while held: locker: key is locked by another owner: "nightly-report"
	// done: <nil>
}
