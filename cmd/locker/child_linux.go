package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setDeathSignal has the kernel SIGTERM CMD if locker dies without a chance
// to stop it (SIGKILL, OOM): its lock lapses, so CMD must not go on.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGTERM }

// stops reports each time CMD's process group leader is stopped (a Ctrl-Z
// at the terminal stops CMD's group, which has the foreground), until
// CMD exits. It takes stop reports only (WSTOPPED, no WEXITED), each once,
// so that Wait still reaps CMD.
func (c *child) stops() <-chan struct{} {
	out := make(chan struct{}, 1)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	go func() {
		defer signal.Stop(chld)
		// A look each half second as well: SIGCHLDs merge, and one for
		// another child (or lost) must not leave CMD stopped unseen.
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-c.done:
				return
			case <-chld:
			case <-tick.C:
			}
			var info unix.Siginfo
			err := unix.Waitid(unix.P_PID, c.cmd.Process.Pid, &info, unix.WSTOPPED|unix.WNOHANG, nil)
			if err == nil && info.Code == cldStopped {
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}

// cldStopped is waitid's si_code for a stopped child (CLD_STOPPED).
const cldStopped = 5
