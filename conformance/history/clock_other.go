//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package history

import "time"

// start is one wall-clock sample, taken as the process starts.
var start = time.Now()

// clock is the wall clock at start plus the monotonic time since: where no
// monotonic clock is shared by every process of the machine, histories
// from several processes line up on one wall-clock sample each, and a
// step of the wall clock later reorders nothing within a process.
func clock() int64 { return start.UnixNano() + int64(time.Since(start)) }
