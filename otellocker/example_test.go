package otellocker_test

import (
	"context"
	"fmt"
	"log"

	"github.com/locker-go/locker"
	_ "github.com/locker-go/locker/adapters/mem"
	"github.com/locker-go/locker/otellocker"
)

// Wrap a Locker once, where it is opened; every lock through it is traced
// and measured on the providers the application installed (here none: the
// global no-op ones).
func ExampleWrap() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "mem://otel-example")
	if err != nil {
		log.Fatal(err)
	}
	l = otellocker.Wrap(l, otellocker.WithBackend("mem"))
	defer l.Close()
	lease, err := l.Lock(ctx, "reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	_, isAdmin := l.(locker.Admin)
	fmt.Println("holding", lease.Key(), "admin kept:", isAdmin)
	// Output: holding reports/daily admin kept: true
}
