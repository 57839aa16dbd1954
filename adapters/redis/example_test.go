package redis_test

import (
	"context"
	"fmt"
	"log"

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
