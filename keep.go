package locker

import (
	"context"
	"errors"
	"sync"
	"time"
)

// keeper renews the nodes an ordered group take holds while it waits for
// the next: a wait may outlast their TTL. Should one be lost, it cancels
// the take (cause errNodeLost), which then starts again.
type keeper struct {
	ctx    context.Context // the take's: cancelled by stop, or when a node is lost
	cancel context.CancelCauseFunc
	once   sync.Once
	quit   chan struct{}
	done   chan struct{}

	mu    sync.Mutex
	nodes []*node
	kick  chan struct{}
}

// keep starts a keeper for a take under ctx; its goroutine starts with
// the first node.
func (p *portable) keep(ctx context.Context) *keeper {
	k := &keeper{quit: make(chan struct{}), kick: make(chan struct{}, 1)}
	k.ctx, k.cancel = context.WithCancelCause(ctx)
	return k
}

// add has the keeper renew n, just granted, from now on.
func (k *keeper) add(n *node) {
	k.mu.Lock()
	k.nodes = append(k.nodes, n)
	first := k.done == nil
	if first {
		k.done = make(chan struct{})
	}
	k.mu.Unlock()
	if first {
		go k.run()
	}
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// stop ends the keeper and waits for a renewal under way: afterwards
// nothing but the caller touches the nodes. It may be called again.
func (k *keeper) stop() {
	k.once.Do(func() { close(k.quit) })
	k.mu.Lock()
	done := k.done
	k.mu.Unlock()
	if done != nil {
		<-done
	}
	k.cancel(nil)
}

// keepRetry is how soon a failed renewal is tried again.
const keepRetry = 10 * time.Millisecond

func (k *keeper) run() {
	defer close(k.done)
	retry := map[*node]time.Time{}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		n, at := k.next(retry)
		timer.Reset(time.Until(at))
		select {
		case <-k.quit:
			return
		case <-k.kick:
			continue
		case <-timer.C:
		}
		if !time.Now().Before(n.g.deadline()) {
			k.cancel(errNodeLost)
			return
		}
		start := time.Now()
		valid, err := n.g.Hold.Refresh(k.ctx)
		switch {
		case errors.Is(err, ErrNotHeld):
			k.cancel(errNodeLost)
			return
		case err != nil:
			retry[n] = time.Now().Add(keepRetry)
		default:
			delete(retry, n)
			k.mu.Lock()
			n.g.start, n.g.Validity = start, valid
			k.mu.Unlock()
		}
	}
}

// next is the node to renew first, and when.
func (k *keeper) next(retry map[*node]time.Time) (*node, time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var first *node
	var at time.Time
	for _, n := range k.nodes {
		t := n.g.start.Add(renewEvery(n.r.TTL, n.g.Validity))
		if r, ok := retry[n]; ok {
			t = r
		}
		if first == nil || t.Before(at) {
			first, at = n, t
		}
	}
	return first, at
}
