package mem_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/adapters/mem"
)

// Two Lockers on one named space exclude each other, as two clients of a
// server backend would.
func ExampleNew() {
	ctx := context.Background()
	a, b := mem.New("example"), mem.New("example")
	defer a.Close()
	defer b.Close()

	lease, err := a.Lock(ctx, "job")
	if err != nil {
		log.Fatal(err)
	}
	_, err = b.TryLock(ctx, "job")
	fmt.Println(errors.Is(err, locker.ErrLocked))
	_ = lease.Unlock(ctx)
	// Output: true
}
