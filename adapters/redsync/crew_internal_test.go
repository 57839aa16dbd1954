package redsync

import (
	"testing"
	"time"
)

// left waits for c's members to have left, failing t after a while.
func left(t *testing.T, c *crew) {
	t.Helper()
	done := make(chan struct{})
	go func() { c.members.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the crew's members did not leave")
	}
}

// A member that ran a call waits for the next, and takes it; one that
// runs a call holds up no other; members leave once idle for the crew's
// idle time, or when it stops.
func TestCrew(t *testing.T) {
	t.Run("a member waits for the next call", func(t *testing.T) {
		c := newCrew(time.Hour)
		defer left(t, c)
		defer c.stop()
		ran := make(chan struct{})
		c.run(func() { ran <- struct{}{} })
		<-ran
		deadline := time.After(5 * time.Second)
		for sent := false; !sent; { // only an idle member takes a send
			select {
			case c.jobs <- func() { ran <- struct{}{} }:
				sent = true
			case <-deadline:
				t.Fatal("no member waited for a call after the first")
			default:
			}
		}
		<-ran
	})
	t.Run("a busy member holds up no call", func(t *testing.T) {
		c := newCrew(time.Hour)
		defer left(t, c)
		defer c.stop()
		release, ran := make(chan struct{}), make(chan struct{})
		c.run(func() { <-release })
		c.run(func() { close(ran) })
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("a call waited for a busy member")
		}
		close(release)
	})
	t.Run("an idle member leaves", func(t *testing.T) {
		c := newCrew(time.Millisecond)
		c.run(func() {})
		left(t, c)
	})
	t.Run("stop has members leave", func(t *testing.T) {
		c := newCrew(time.Hour)
		c.run(func() {})
		c.stop()
		left(t, c)
		ran := make(chan struct{})
		c.run(func() { close(ran) }) // after stop: on a goroutine of its own
		<-ran
		left(t, c)
	})
}
