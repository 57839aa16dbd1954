package redsync

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
)

// A TTL that leaves no validity after the drift allowance and a node
// timeout is refused before any master is asked: these have none.
func TestShortTTLRefusedBeforeMasters(t *testing.T) {
	var clients []goredis.UniversalClient
	for range 3 {
		c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	l, err := New(clients) // node timeout 50 ms
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for op, call := range map[string]func(context.Context, string, ...locker.Option) (locker.Lease, error){
		"Lock": l.Lock, "TryLock": l.TryLock,
	} {
		lease, err := call(context.Background(), "k", locker.WithTTL(50*time.Millisecond))
		if lease != nil || !errors.Is(err, locker.ErrInvalidTTL) {
			t.Errorf("%s with a 50ms TTL = %v, %v; want ErrInvalidTTL", op, lease, err)
		}
	}
}
