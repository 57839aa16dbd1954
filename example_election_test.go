package locker_test

import (
	"context"
	"fmt"
	"log"

	"github.com/locker-go/locker"
)

// One instance leads "scheduler" at a time; its lease's fence is the term,
// which downstream writes can check. Unlock resigns.
func ExampleCampaign() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "mem://campaign-example")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	lead, err := locker.Campaign(ctx, l, "scheduler", locker.WithLabel("10.0.0.7:8080"))
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-lead.Done(): // leadership lost: stop acting as leader
	default:
		fmt.Println("leading, term", lead.Fence())
	}
	lead.Unlock(ctx) // resign
	// Output:
	// leading, term 1
}

// Any process can follow an election without campaigning: the current
// leader first (none here), then each change.
func ExampleObserve() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := locker.Open(ctx, "mem://observe-example")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	leaders := locker.Observe(ctx, l, "scheduler")
	fmt.Printf("leader: %q\n", (<-leaders).Label)

	lead, _ := locker.Campaign(ctx, l, "scheduler", locker.WithLabel("10.0.0.7:8080"))
	fmt.Printf("leader: %q\n", (<-leaders).Label)
	lead.Unlock(ctx)
	fmt.Printf("leader: %q\n", (<-leaders).Label)
	// Output:
	// leader: ""
	// leader: "10.0.0.7:8080"
	// leader: ""
}
