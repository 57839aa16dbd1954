//go:build !linux

package conformance

import "time"

// HoldFor is the work under the lock in the contended workloads (see
// hold_linux.go): off Linux, time.Sleep.
func HoldFor(d time.Duration) { time.Sleep(d) }
