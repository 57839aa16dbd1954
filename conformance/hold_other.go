//go:build !linux

package conformance

import "time"

// holdFor is the work under the lock in the contended workloads (see
// hold_linux.go): elsewhere the runtime's timers wait in finer steps.
func holdFor(d time.Duration) { time.Sleep(d) }
