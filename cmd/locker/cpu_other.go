//go:build !unix

package main

import "time"

// cpuTime is unknown here: the bench shows no CPU figure.
func cpuTime() time.Duration { return 0 }
