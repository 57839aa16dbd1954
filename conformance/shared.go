package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance/history"
)

// The checks of shared (read) locks: many readers or one writer, writers
// not starved, fences rising with every grant, re-entry per mode.

// noModes skips a check that needs shared leases to share, or subtree
// locks on unrelated paths to be independent.
func (e *env) noModes() error {
	if e.h.NoModes {
		return skip("the harness declares a driver without modes: shared and subtree locks lock more (checked by the exclusion checks), nothing to share")
	}
	return nil
}

// Shared leases hold a key together; an exclusive one excludes them and
// is excluded; fences rise with every grant; Admin shows every holder.
func checkShared(e *env) error {
	if err := e.noModes(); err != nil {
		return err
	}
	key := e.prefix + "k"
	ls, err := e.clientsN(3)
	if err != nil {
		return err
	}
	var readers []locker.Lease
	for i := range 2 {
		lease, err := e.tryLock(ls[i], key, locker.Shared())
		if err != nil {
			return fmt.Errorf("shared lease %d beside another: %w", i+1, err)
		}
		readers = append(readers, lease)
	}
	if readers[1].Fence() <= readers[0].Fence() {
		e.errorf("fence %d of the second shared grant is not above %d of the first", readers[1].Fence(), readers[0].Fence())
	}
	if _, err := ls[2].TryLock(e.ctx, key); !errors.Is(err, locker.ErrLocked) {
		e.errorf("exclusive TryLock beside shared leases = %v, want ErrLocked", err)
	}
	if adm, ok := ls[2].(locker.Admin); ok {
		info, err := adm.Status(e.ctx, key)
		if err != nil || info.Mode != locker.ModeShared || len(info.Holders) != 2 ||
			info.Holders[0].Owner != readers[0].Owner() || info.Holders[1].Fence != readers[1].Fence() {
			e.errorf("Status of a key held shared twice = %+v, %v; want mode Shared and both holders by fence", info, err)
		}
	}
	for _, r := range readers {
		if err := e.unlock(r); err != nil {
			return err
		}
	}
	writer, err := e.tryLock(ls[2], key)
	if err != nil {
		return fmt.Errorf("exclusive TryLock once the shared leases were unlocked: %w", err)
	}
	if writer.Fence() <= readers[1].Fence() {
		e.errorf("exclusive fence %d is not above the shared %d before it", writer.Fence(), readers[1].Fence())
	}
	if _, err := ls[0].TryLock(e.ctx, key, locker.Shared()); !errors.Is(err, locker.ErrLocked) {
		e.errorf("shared TryLock beside an exclusive lease = %v, want ErrLocked", err)
	}
	return e.unlock(writer)
}

// A shared request arriving after a waiting exclusive one waits behind it.
func checkWriterNotStarved(e *env) error {
	if err := e.noModes(); err != nil {
		return err
	}
	key := e.prefix + "k"
	ls, err := e.clientsN(3)
	if err != nil {
		return err
	}
	reader, err := e.tryLock(ls[0], key, locker.Shared(), locker.WithTTL(time.Minute))
	if err != nil {
		return err
	}
	type grant struct {
		lease locker.Lease
		err   error
	}
	writer, late := make(chan grant, 1), make(chan grant, 1)
	go func() {
		l, err := ls[1].Lock(e.ctx, key)
		writer <- grant{l, err}
	}()
	if err := e.writerQueued(ls[2], key); err != nil {
		return err
	}
	go func() {
		l, err := ls[2].Lock(e.ctx, key, locker.Shared())
		late <- grant{l, err}
	}()
	select {
	case g := <-late:
		return fmt.Errorf("a shared Lock arriving behind a waiting exclusive one went first: %v, %v", g.lease, g.err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := e.unlock(reader); err != nil {
		return err
	}
	w := <-writer
	if w.err != nil {
		return fmt.Errorf("the waiting exclusive Lock: %w", w.err)
	}
	select {
	case g := <-late:
		e.errorf("the late shared Lock was granted beside the exclusive lease: %v, %v", g.lease, g.err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := e.unlock(w.lease); err != nil {
		return err
	}
	r := <-late
	if r.err != nil {
		return fmt.Errorf("the late shared Lock: %w", r.err)
	}
	if r.lease.Fence() <= w.lease.Fence() {
		e.errorf("fence %d of the late shared grant is not above the writer's %d", r.lease.Fence(), w.lease.Fence())
	}
	return e.unlock(r.lease)
}

// writerQueued waits until a shared TryLock of key by l is refused: a
// writer has queued (until it does, readers still share the key).
func (e *env) writerQueued(l locker.Locker, key string) error {
	return eventually(slack, "a shared TryLock still shares the key while an exclusive Lock waits", func() (bool, error) {
		lease, err := l.TryLock(e.ctx, key, locker.Shared())
		if err == nil {
			return false, lease.Unlock(e.ctx)
		}
		return errors.Is(err, locker.ErrLocked), ignoreLocked(err)
	})
}

func ignoreLocked(err error) error {
	if errors.Is(err, locker.ErrLocked) {
		return nil
	}
	return err
}

// Re-entry by WithOwner is per mode; the other mode is ErrModeMismatch and
// changes nothing.
func checkSharedReentry(e *env) error {
	if err := e.noModes(); err != nil {
		return err
	}
	key := e.prefix + "k"
	a, b, err := e.two()
	if err != nil {
		return err
	}
	me := locker.WithOwner("reader-" + runID)
	first, err := e.tryLock(a, key, me, locker.Shared())
	if err != nil {
		return err
	}
	second, err := e.lock(a, key, me, locker.Shared())
	if err != nil {
		return err
	}
	if second.Fence() != first.Fence() {
		e.errorf("shared re-entry changed the fence: %d then %d", first.Fence(), second.Fence())
	}
	for name, take := range calls(a) {
		if l, err := take(e.ctx, key, me); !errors.Is(err, locker.ErrModeMismatch) {
			e.errorf("exclusive %s by the owner of a shared lease = %v, %v; want ErrModeMismatch", name, l, err)
		}
	}
	other, err := e.tryLock(b, key, locker.Shared())
	if err != nil {
		return fmt.Errorf("after the refused mismatch: %w", err)
	}
	for _, l := range []locker.Lease{first, second, other} {
		if err := e.unlock(l); err != nil {
			return err
		}
	}
	held, err := e.tryLock(b, key, locker.WithOwner("writer-"+runID))
	if err != nil {
		return fmt.Errorf("the mismatch left something behind: %w", err)
	}
	if _, err := b.TryLock(e.ctx, key, locker.WithOwner("writer-"+runID), locker.Shared()); !errors.Is(err, locker.ErrModeMismatch) {
		e.errorf("shared TryLock by the owner of an exclusive lease = %v, want ErrModeMismatch", err)
	}
	return e.unlock(held)
}

// A crashed shared holder's lease lapses within its TTL (or, without a
// way to crash a client, an unrenewed one's), and a writer goes on.
func checkSharedExpiry(e *env) error {
	key := e.prefix + "k"
	a, b, err := e.two()
	if err != nil {
		return err
	}
	ttl := e.h.ttl()
	opts := []locker.Option{locker.Shared(), locker.WithTTL(ttl)}
	how := "crashed"
	if e.h.Crash == nil {
		opts, how = append(opts, locker.WithKeepAlive(false)), "unrenewed"
	}
	old, err := e.tryLock(a, key, opts...)
	if err != nil {
		return err
	}
	if e.h.Crash != nil {
		if err := e.h.Crash(e.ctx, a); err != nil {
			return fmt.Errorf("Crash: %w", err)
		}
	}
	return e.takeOver(b, key, old, how+" shared")
}

// Readers and writers under contention: 6 clients, one round in four
// exclusive, every call recorded and the history checked (modes
// included); readers check that no writer is inside, writers that nobody
// is, and a fenced counter that only writers move must come out exact.
func checkSharedExclusion(e *env) error {
	const clients, rounds = 6, 20
	ls, err := e.clientsN(clients)
	if err != nil {
		return err
	}
	key := e.prefix + "k"
	var (
		rec              = history.New()
		counter          history.FencedCounter
		readers, writers atomic.Int32
		wg               sync.WaitGroup
	)
	for i, l := range ls {
		c := rec.Client()
		wg.Go(func() {
			for j := range rounds {
				shared := (i+j)%4 != 0
				if err := e.sharedRound(c, l, key, shared, &readers, &writers, &counter); err != nil {
					e.error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := rec.Check(e.ctx); err != nil {
		return err
	}
	if v, n := counter.Exact(); v != n || n != clients*rounds/4 {
		e.errorf("fenced counter %d after %d accepted writes, want %d: a write was lost or refused", v, n, clients*rounds/4)
	}
	return nil
}

// sharedRound is one client's round of SharedExclusion.
func (e *env) sharedRound(c *history.Client, l locker.Locker, key string, shared bool, readers, writers *atomic.Int32, counter *history.FencedCounter) error {
	opts := []locker.Option{locker.WithTTL(10 * time.Second)}
	if shared {
		opts = append(opts, locker.Shared())
	}
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	lease, err := c.Lock(ctx, l, key, opts...)
	cancel()
	if err != nil {
		return fmt.Errorf("Lock(%q, shared %v): %w", key, shared, err)
	}
	if shared {
		readers.Add(1)
		if n := writers.Load(); n != 0 {
			e.errorf("a reader inside beside %d writers", n)
		}
		time.Sleep(200 * time.Microsecond)
		readers.Add(-1)
	} else {
		if n := writers.Add(1); n != 1 || readers.Load() != 0 {
			e.errorf("a writer inside beside %d writers and %d readers", n-1, readers.Load())
		}
		v := counter.Read()
		time.Sleep(200 * time.Microsecond)
		if !counter.Write(lease.Fence(), v+1) {
			e.errorf("the fenced counter refused fence %d", lease.Fence())
		}
		writers.Add(-1)
	}
	if err := lease.Unlock(e.ctx); err != nil && !lost(lease, err) {
		return fmt.Errorf("Unlock(%q): %w", key, err)
	}
	return nil
}
