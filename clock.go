package locker

import "time"

// epoch anchors keep-alive's schedules on the monotonic clock: a tick is
// nanoseconds since epoch (monoAt), and a time made from one (atMono)
// carries a monotonic reading. On the wall clock (UnixNano, Truncate), a
// step back of the clock (NTP, a VM resumed) held every renewal back as
// long, and leases whose deadlines the monotonic clock keeps were lost.
var epoch = time.Now()

// monoAt is t's tick: nanoseconds since epoch, by the monotonic clock
// where t has a reading.
func monoAt(t time.Time) int64 { return int64(t.Sub(epoch)) }

// atMono is the time of tick n, with a monotonic reading.
func atMono(n int64) time.Time { return epoch.Add(time.Duration(n)) }
