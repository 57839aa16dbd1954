package perproc

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func TestOpensOnceAndClosesAfterTheLast(t *testing.T) {
	var s Map[string, int]
	opened, shut := 0, 0
	open := func() (int, error) { opened++; return 42, nil }
	close := func(int) { shut++ }
	v1, release1, err1 := s.Get(t.Context(), "k", open, close)
	v2, release2, err2 := s.Get(t.Context(), "k", open, close)
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
	if _, release3, _ := s.Get(t.Context(), "k", open, close); opened != 2 {
		t.Fatalf("opened %d times after the last release; want anew (2)", opened)
	} else {
		release3()
	}
}

func TestFailedOpenIsNotKept(t *testing.T) {
	var s Map[string, int]
	boom := errors.New("boom")
	if _, _, err := s.Get(t.Context(), "k", func() (int, error) { return 0, boom }, func(int) {}); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	v, release, err := s.Get(t.Context(), "k", func() (int, error) { return 7, nil }, func(int) {})
	if err != nil || v != 7 {
		t.Fatalf("after a failed open: %d, %v; want a new open's 7", v, err)
	}
	release()
}

// Callers that wait behind a failing open try once more themselves
// rather than report another caller's failure (its cancelled context).
func TestWaitersRetryAFailedOpen(t *testing.T) {
	var s Map[string, int]
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
	wg.Go(func() { _, _, _ = s.Get(t.Context(), "k", open, func(int) {}) })
	<-started
	res := make(chan error, 1)
	go func() {
		v, release, err := s.Get(t.Context(), "k", open, func(int) {})
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
