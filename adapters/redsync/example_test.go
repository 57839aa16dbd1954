package redsync_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/locker-go/locker"
	_ "github.com/locker-go/locker/adapters/redsync" // registers redlock://
)

// Lock a key on a majority of five masters, work under it, unlock.
func Example() {
	url := os.Getenv("LOCKER_TEST_REDLOCK")
	if url == "" { // the masters of scripts/backends
		url = "redlock://127.0.0.1:16380,127.0.0.1:16381,127.0.0.1:16382,127.0.0.1:16383,127.0.0.1:16384"
	}
	ctx := context.Background()
	l, err := locker.Open(ctx, url+"?prefix=example:")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	key := fmt.Sprintf("invoice/%d", time.Now().UnixNano())
	lease, err := l.Lock(ctx, key, locker.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	// Finish before lease.Deadline(); pass lease.Fence() to the storage
	// you write to, so it can refuse a stale holder's writes.
	fmt.Println("held:", lease.Fence() > 0, time.Until(lease.Deadline()) > 9*time.Second)
	if err := lease.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", lease.Err())
	// Output:
	// held: true true
	// released: locker: lease is not held
}
