package redis_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	lockredis "github.com/locker-go/locker/adapters/redis"
)

// New wraps a client the application already has. (This example talks to
// the Redis that scripts/backends starts.)
func ExampleNew() {
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:16379"})
	defer client.Close()
	l, err := lockredis.New(client, lockredis.WithPrefix("example:"))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx := context.Background()
	err = locker.Do(ctx, l, "invoice/42", func(ctx context.Context) error {
		fmt.Println("sending invoice 42 once")
		return nil
	})
	fmt.Println(err)
	// Output:
	// sending invoice 42 once
	// <nil>
}

// WithLogger has the Locker report its rare events (a lease lost, a
// renewal retried, the pub/sub connection made again) to an slog.Logger;
// without it the Locker is silent. (Here the lease is taken from its
// holder by an operator's ForceUnlock, and the loss is logged.)
func ExampleWithLogger() {
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:16379"})
	defer client.Close()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key != slog.MessageKey && a.Key != slog.LevelKey && a.Key != "key" {
				return slog.Attr{} // keep the output stable for the example
			}
			return a
		},
	}))
	l, err := lockredis.New(client, lockredis.WithPrefix("example:"), lockredis.WithLogger(logger))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx := context.Background()
	lease, err := l.Lock(ctx, "report/daily", locker.WithTTL(time.Second)) // its loss is seen at the next renewal
	if err != nil {
		log.Fatal(err)
	}
	if err := l.(locker.Admin).ForceUnlock(ctx, "report/daily"); err != nil {
		log.Fatal(err)
	}
	<-lease.Done()
	// Output:
	// level=WARN msg="locker: lease lost" key=report/daily
}
