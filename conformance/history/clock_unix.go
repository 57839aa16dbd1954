//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package history

import "golang.org/x/sys/unix"

// clock reads CLOCK_MONOTONIC, which every process on the machine shares
// and which no one steps: histories from several processes line up on it.
// (A time.Now sample's wall reading, taken apart from its monotonic one,
// is off by a stall between the two and by any step of the wall clock.)
func clock() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("history: CLOCK_MONOTONIC: " + err.Error())
	}
	return ts.Nano()
}
