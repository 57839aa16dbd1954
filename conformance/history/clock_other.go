//go:build !linux

package history

import "time"

// clock reads the wall clock: where no monotonic clock is shared by every
// process of the machine, histories from several processes line up on it,
// as well as it is kept.
func clock() int64 { return time.Now().UnixNano() }
