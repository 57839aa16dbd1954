package conformance

import (
	"time"

	"golang.org/x/sys/unix"
)

// HoldFor is the work under the lock in the contended workloads (Contend,
// Bench, `locker bench`), for a workload of one's own to hold alike: on
// Linux the calling thread blocks in nanosleep(2) for d, as it would in a
// blocking call. Not time.Sleep: a Go timer shorter than a millisecond
// left when the runtime's network poller next waits is rounded up to a
// whole millisecond there (epoll_wait takes milliseconds:
// golang/go#53824), so a 1 ms time.Sleep in a process whose other
// goroutines used the network meanwhile ends up to a millisecond late.
// With every client of a run in one process, that charged each lock for
// what its other clients did during the hold, and most a FIFO lock's,
// whose waiters queue while the key is held (docs/peers.md: holds of
// 1.6–1.8 ms, where a process beside them slept 1.1; BenchmarkHold shows
// it with one reply).
func HoldFor(d time.Duration) {
	if d <= 0 {
		return
	}
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for unix.Nanosleep(&ts, &ts) == unix.EINTR { // the rest, after a signal
	}
}
