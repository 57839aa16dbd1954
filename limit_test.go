package locker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/adapters/mem"
)

// Bad Limits are refused before anything is taken.
func TestLimitInvalid(t *testing.T) {
	ctx := context.Background()
	l := mem.New(t.Name())
	defer l.Close()
	for _, c := range []struct {
		opts []locker.Option
		want error
	}{
		{[]locker.Option{locker.Limit(0)}, locker.ErrInvalidOption},
		{[]locker.Option{locker.Limit(-2)}, locker.ErrInvalidOption},
		{[]locker.Option{locker.Limit(2), locker.Shared()}, locker.ErrModeMismatch},
		{[]locker.Option{locker.Limit(2), locker.Subtree()}, locker.ErrModeMismatch},
	} {
		if lease, err := l.TryLock(ctx, "k", c.opts...); !errors.Is(err, c.want) {
			t.Errorf("TryLock = %v, %v; want %v", lease, err, c.want)
		}
	}
	if _, err := locker.Campaign(ctx, l, "k", locker.Limit(2)); !errors.Is(err, locker.ErrModeMismatch) {
		t.Errorf("Campaign with Limit(2) = %v; want ErrModeMismatch", err)
	}
	if list, err := l.(locker.Admin).List(ctx, ""); err != nil || len(list) != 0 {
		t.Errorf("List after refused calls = %+v, %v; want nothing taken", list, err)
	}
}

// Limit(1) is an exclusive lock: a plain Lock meets it as one.
func TestLimitOneIsExclusive(t *testing.T) {
	ctx := context.Background()
	l := mem.New(t.Name())
	defer l.Close()
	one, err := l.TryLock(ctx, "k", locker.Limit(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(ctx, "k"); !errors.Is(err, locker.ErrLocked) {
		t.Errorf("a plain TryLock beside a Limit(1) = %v; want ErrLocked", err)
	}
	if _, err := l.TryLock(ctx, "k", locker.Limit(2)); !errors.Is(err, locker.ErrModeMismatch) {
		t.Errorf("Limit(2) beside a Limit(1) = %v; want ErrModeMismatch", err)
	}
	_ = one.Unlock(ctx)
}

// Waiters of a full Limit(2) are served in arrival order, and Status shows
// the holders, the mode and n.
func TestLimitWaitersInOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := mem.New(t.Name())
	defer l.Close()
	a, _ := l.TryLock(ctx, "k", locker.Limit(2))
	b, _ := l.TryLock(ctx, "k", locker.Limit(2))
	info, err := l.(locker.Admin).Status(ctx, "k")
	if err != nil || info.Mode != locker.ModeLimited || info.Limit != 2 || len(info.Holders) != 2 {
		t.Fatalf("Status = %+v, %v; want two holders of a Limit(2)", info, err)
	}
	got := make(chan string, 2)
	first := testLockInTurn(t, ctx, l, "first", got)
	second := testLockInTurn(t, ctx, l, "second", got)
	_ = a.Unlock(ctx)
	if w := <-got; w != "first" {
		t.Errorf("the freed slot went to the %s waiter; want the first", w)
	}
	_ = b.Unlock(ctx)
	<-got
	for _, c := range []chan locker.Lease{first, second} {
		_ = (<-c).Unlock(ctx)
	}
}

// testLockInTurn starts a Limit(2) Lock named who and returns once it
// waits (Status counts it); its lease comes on the channel returned, its
// name on got.
func testLockInTurn(t *testing.T, ctx context.Context, l locker.Locker, who string, got chan<- string) chan locker.Lease {
	t.Helper()
	adm := l.(locker.Admin)
	before, _ := adm.Status(ctx, "k")
	c := make(chan locker.Lease, 1)
	go func() {
		lease, err := l.Lock(ctx, "k", locker.Limit(2))
		if err != nil {
			t.Error(err)
			close(c)
			return
		}
		got <- who
		c <- lease
	}()
	for { // Status offers no notification: poll it until the waiter queues
		if info, err := adm.Status(ctx, "k"); err != nil || info.Waiters > before.Waiters {
			return c
		}
		time.Sleep(time.Millisecond)
	}
}
