package zookeeper_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/locker-go/locker"
	_ "github.com/locker-go/locker/adapters/zookeeper"
)

func Example() {
	ctx := context.Background()
	// The Locker opens a ZooKeeper session per rung of TTLs it is given,
	// each with a timeout at most the TTL.
	l, err := locker.Open(ctx, "zk://127.0.0.1:12181/locker")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	err = locker.Do(ctx, l, "example/report", func(ctx context.Context) error {
		fmt.Println("holding example/report")
		return nil
	}, locker.WithTTL(10*time.Second))
	fmt.Println(err)
	// Output:
	// holding example/report
	// <nil>
}
