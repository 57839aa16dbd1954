package redsync

import (
	"slices"
	"sync"
	"time"
)

// crew runs calls on goroutines kept up to its idle time after each
// call, waiting for the next, so that a stack grown deep in go-redis
// serves many calls where a goroutine started per call grew one each
// time. A call goes only to an idle member, never behind a busy one, so
// a stalled master holds up no other call; the member idle the shortest
// takes it, so that after a burst the others go idle long enough to
// leave.
type crew struct {
	idle time.Duration

	mu      sync.Mutex
	waiting []chan func() // the idle members' inboxes, the latest idle last
	members int           // started, not yet left
	stopped bool
}

// crewIdle is how long a member waits for a call before it leaves: it
// spans the pauses between a busy Locker's rounds.
const crewIdle = 5 * time.Second

func newCrew(idle time.Duration) *crew { return &crew{idle: idle} }

// run runs f on the member idle the shortest, or on a new one if none is.
func (c *crew) run(f func()) {
	c.mu.Lock()
	if n := len(c.waiting); n > 0 {
		inbox := c.waiting[n-1]
		c.waiting = c.waiting[:n-1]
		c.mu.Unlock()
		inbox <- f // room for one: never blocks
		return
	}
	c.members++
	c.mu.Unlock()
	go c.work(f)
}

// work runs f, then each call handed to it, until it has waited c.idle
// for one or the crew stopped.
func (c *crew) work(f func()) {
	inbox := make(chan func(), 1)
	var wait *time.Timer
	for ok := true; ok; {
		f()
		f = nil // not kept alive while idle
		if !c.await(inbox) {
			break
		}
		if wait == nil {
			wait = time.NewTimer(c.idle)
		} else {
			wait.Reset(c.idle)
		}
		select {
		case f, ok = <-inbox: // closed by stop: !ok
		case <-wait.C:
			if c.leave(inbox) {
				ok = false
			} else { // a call came as the wait ended
				f, ok = <-inbox
			}
		}
	}
	if wait != nil {
		wait.Stop()
	}
	c.mu.Lock()
	c.members--
	c.mu.Unlock()
}

// await puts inbox among the idle members'; false if the crew stopped.
func (c *crew) await(inbox chan func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	c.waiting = append(c.waiting, inbox)
	return true
}

// leave takes inbox off the idle members'; false if a call or stop took
// it first.
func (c *crew) leave(inbox chan func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.waiting, inbox)
	if i < 0 {
		return false
	}
	c.waiting = slices.Delete(c.waiting, i, i+1)
	return true
}

// stop has the idle members leave, and each busy one after its call; a
// call run after it starts a member that leaves after it.
func (c *crew) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for _, inbox := range c.waiting {
		close(inbox)
	}
	c.waiting = nil
}

// size is how many members the crew has, busy or idle.
func (c *crew) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members
}
