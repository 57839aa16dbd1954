package sql

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/locker-go/locker"
)

func TestPerProcessOpensOnceAndClosesAfterTheLast(t *testing.T) {
	var s perProcess[string, int]
	opened, shut := 0, 0
	open := func() (int, error) { opened++; return 42, nil }
	close := func(int) { shut++ }
	v1, release1, err1 := s.get(t.Context(), "k", open, close)
	v2, release2, err2 := s.get(t.Context(), "k", open, close)
	if err1 != nil || err2 != nil || v1 != 42 || v2 != 42 || opened != 1 {
		t.Fatalf("got %d, %d (%v, %v), opened %d times; want 42 twice, opened once", v1, v2, err1, err2, opened)
	}
	release1()
	release1() // once only: must not take the second holder's reference
	if shut != 0 {
		t.Fatal("closed while a holder remains")
	}
	release2()
	if shut != 1 || len(s.m) != 0 {
		t.Fatalf("after the last release: closed %d times, %d entries left; want 1 and 0", shut, len(s.m))
	}
	if _, release3, _ := s.get(t.Context(), "k", open, close); opened != 2 {
		t.Fatalf("opened %d times after the last release; want anew (2)", opened)
	} else {
		release3()
	}
}

func TestPerProcessFailedOpenIsNotKept(t *testing.T) {
	var s perProcess[string, int]
	boom := errors.New("boom")
	if _, _, err := s.get(t.Context(), "k", func() (int, error) { return 0, boom }, func(int) {}); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	v, release, err := s.get(t.Context(), "k", func() (int, error) { return 7, nil }, func(int) {})
	if err != nil || v != 7 {
		t.Fatalf("after a failed open: %d, %v; want a new open's 7", v, err)
	}
	release()
}

// Callers that wait behind a failing open try once more themselves
// rather than report another caller's failure (its cancelled context).
func TestPerProcessWaitersRetryAFailedOpen(t *testing.T) {
	var s perProcess[string, int]
	started, proceed := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	calls := 0
	open := func() (int, error) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			close(started)
			<-proceed
			return 0, context.Canceled // the first caller's own context
		}
		return 9, nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { _, _, _ = s.get(t.Context(), "k", open, func(int) {}) })
	<-started
	res := make(chan error, 1)
	go func() {
		v, release, err := s.get(t.Context(), "k", open, func(int) {})
		if err == nil {
			release()
			if v != 9 {
				err = errors.New("wrong value")
			}
		}
		res <- err
	}()
	close(proceed)
	wg.Wait()
	if err := <-res; err != nil {
		t.Fatalf("waiter behind a failed open: %v; want its own open's value", err)
	}
}

// Lockers opened on one URL share one database handle, which outlives
// each of them until the last is closed.
func TestLockersOnOneURLShareAHandle(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite://" + dir + "/shared.db"
	ctx := t.Context()
	a, err := locker.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := locker.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	entries := func() (n int) {
		pools.mu.Lock()
		defer pools.mu.Unlock()
		for k := range pools.m {
			if strings.Contains(k, dir) {
				n++
			}
		}
		return n
	}
	before := entries()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	lease, err := b.Lock(ctx, "k")
	if err != nil {
		t.Fatalf("Lock on a Locker whose sibling on the same URL closed: %v", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if after := entries(); before != 1 || after != 0 {
		t.Fatalf("shared handles on the file: %d while open, %d after the last Close; want 1 and 0", before, after)
	}
}
