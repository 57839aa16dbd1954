package locker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/adapters/mem"
)

func TestDoPassesItsLease(t *testing.T) {
	l := mem.New(t.Name())
	defer l.Close()
	if _, ok := locker.LeaseFrom(context.Background()); ok {
		t.Error("LeaseFrom found a lease outside Do")
	}
	err := locker.Do(context.Background(), l, "k", func(ctx context.Context) error {
		lease, ok := locker.LeaseFrom(ctx)
		if !ok || lease.Key() != "k" || lease.Fence() == 0 || lease.Err() != nil {
			t.Errorf("LeaseFrom inside Do = %v, %v; want the held lease on k", lease, ok)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fn that stops because its ctx ended with the lease returns ctx's error;
// Do still says the lease was lost, so the caller knows the work was not
// protected to its end.
func TestDoReportsALostLeaseWhateverFnReturns(t *testing.T) {
	l := mem.New(t.Name())
	defer l.Close()
	err := locker.Do(context.Background(), l, "k", func(ctx context.Context) error {
		<-ctx.Done() // the lease lapses: no keep-alive
		return ctx.Err()
	}, locker.WithTTL(50*time.Millisecond), locker.WithKeepAlive(false))
	if !errors.Is(err, locker.ErrLeaseLost) || !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v; want an error matching ErrLeaseLost and fn's context.Canceled", err)
	}
	boom := errors.New("boom")
	err = locker.Do(context.Background(), l, "k", func(context.Context) error { return boom })
	if !errors.Is(err, boom) || errors.Is(err, locker.ErrLeaseLost) {
		t.Errorf("Do with a held lease = %v; want fn's error alone", err)
	}
}
