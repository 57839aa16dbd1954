package redsync

import (
	"testing"
	"testing/synctest"
	"time"
)

// wantSize fails t unless c has n members once every goroutine of the
// bubble is blocked.
func wantSize(t *testing.T, c *crew, n int, when string) {
	t.Helper()
	synctest.Wait()
	if got := c.size(); got != n {
		t.Fatalf("%s: %d members, want %d", when, got, n)
	}
}

// stopCrew stops c, whose members must then leave: a bubble's goroutines
// must end with its function.
func stopCrew(t *testing.T, c *crew) {
	c.stop()
	wantSize(t, c, 0, "stopped")
}

// A member that ran a call takes the next, until it has waited the
// crew's idle time for one; one busy with a call holds up no other; the
// member idle the shortest takes a call, so that a crew grown in a burst
// shrinks back while calls go on one at a time; stop has them leave.
func TestCrew(t *testing.T) {
	const idle = 100 * time.Millisecond
	t.Run("a member takes the next call, until idle that long", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, ran := newCrew(idle), 0
			c.run(func() { ran++ })
			wantSize(t, c, 1, "after a call")
			time.Sleep(idle / 2)
			c.run(func() { ran++ })
			wantSize(t, c, 1, "after a second call, half the idle time later")
			time.Sleep(idle - time.Millisecond) // from the second call
			wantSize(t, c, 1, "just short of the idle time after the second call")
			time.Sleep(2 * time.Millisecond)
			wantSize(t, c, 0, "past the idle time")
			if ran != 2 {
				t.Fatalf("%d calls ran, want 2", ran)
			}
		})
	})
	t.Run("a busy member holds up no call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, release, ran := newCrew(idle), make(chan struct{}), false
			defer stopCrew(t, c)
			c.run(func() { <-release })
			c.run(func() { ran = true })
			wantSize(t, c, 2, "a call beside a blocked one")
			if !ran {
				t.Fatal("a call waited for a busy member")
			}
			close(release)
		})
	})
	t.Run("a crew grown in a burst shrinks back", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, release := newCrew(idle), make(chan struct{})
			defer stopCrew(t, c)
			for range 8 {
				c.run(func() { <-release })
			}
			close(release)
			wantSize(t, c, 8, "after a burst of 8")
			for range 30 { // one call at a time, well within the idle time
				c.run(func() {})
				time.Sleep(idle / 10)
			}
			wantSize(t, c, 1, "after 3 idle times of one call at a time")
		})
	})
	t.Run("stop has members leave", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, release := newCrew(time.Hour), make(chan struct{})
			c.run(func() {})
			c.run(func() { <-release })
			wantSize(t, c, 2, "one idle, one busy")
			c.stop()
			wantSize(t, c, 1, "stopped, with a call running")
			close(release)
			wantSize(t, c, 0, "stopped, its call done")
			ran := false
			c.run(func() { ran = true })
			wantSize(t, c, 0, "a call after stop")
			if !ran {
				t.Fatal("a call after stop did not run")
			}
		})
	})
}
