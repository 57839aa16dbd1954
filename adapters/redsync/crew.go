package redsync

import (
	"sync"
	"time"
)

// crew runs a round's calls, one per master, on goroutines it keeps for
// a while after each call, waiting for the next: a call runs deep in
// go-redis, and a goroutine started for it grew its stack there every
// time (runtime.newstack and copystack took 13% of the client's CPU on
// the contended benchmark, 8 Lockers on one key, where a hand-off's two
// rounds make ten calls; with the crew, 10% less CPU in all and
// uncontended lock+unlock 7% faster). A call is handed only to an idle
// member, never queued behind a busy one, so a stalled master holds up
// no other call.
type crew struct {
	jobs     chan func() // unbuffered: a send lands only with an idle member
	idle     time.Duration
	quit     chan struct{}
	quitOnce sync.Once
	members  sync.WaitGroup // started, not yet left
}

// crewIdle is how long a member waits for a call before it leaves: it
// spans the pauses between a busy Locker's rounds, and a burst of calls
// leaves no goroutines behind for long.
const crewIdle = 5 * time.Second

func newCrew(idle time.Duration) *crew {
	return &crew{jobs: make(chan func()), idle: idle, quit: make(chan struct{})}
}

// run runs f on an idle member, or on a new one if none is idle.
func (c *crew) run(f func()) {
	select {
	case c.jobs <- f:
	default:
		c.members.Add(1)
		go c.work(f)
	}
}

// work runs f, then each call handed to it, until it has waited idle
// for a call that long or the crew stopped.
func (c *crew) work(f func()) {
	defer c.members.Done()
	wait := time.NewTimer(c.idle)
	defer wait.Stop()
	for {
		f()
		f = nil // not kept alive while idle
		wait.Reset(c.idle)
		select {
		case f = <-c.jobs:
		case <-wait.C:
			return
		case <-c.quit:
			return
		}
	}
}

// stop has the idle members leave, and each busy one after its call; a
// call run after it has a goroutine of its own.
func (c *crew) stop() { c.quitOnce.Do(func() { close(c.quit) }) }
