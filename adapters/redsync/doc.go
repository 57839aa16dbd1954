// Package redsync is the Redlock adapter of locker: one lock held on a
// majority of N independent Redis masters (N odd, at least 3), so that
// locking and unlocking keep working while a minority of masters is down.
//
//	l, err := redsync.New([]goredis.UniversalClient{c1, c2, c3, c4, c5})
//	// or, configuration-driven:
//	l, err := locker.Open(ctx, "redlock://h1:6379,h2:6379,h3:6379,h4:6379,h5:6379")
//
// # The algorithm
//
// Each attempt follows Redlock as go-redsync/redsync's Mutex runs it: note
// the start time; run one atomic script on every master in parallel, each
// bounded by a per-node timeout (50 ms by default, WithNodeTimeout) so a
// dead or stopped master cannot stall the client; succeed if a quorum
// (N/2+1) granted and time is left; on failure, undo the attempt on every
// master that granted or did not answer. The lease is valid until
// start + TTL − drift, drift = TTL×0.01 + 2 ms (redsync's drift factor plus
// Redlock's allowance for PX resolution): that is Lease.Deadline.
// Keep-alive extends the lock on a quorum every TTL/3; when no quorum can
// be reached the shared lease mechanics retry until the deadline and then
// report ErrLeaseLost.
//
// # Why our own scripts instead of redsync's Mutex
//
// redsync's Mutex stores a bare random token with SET NX. That gives
// neither a fencing token nor re-entry (WithOwner's hold count), nor the
// holder's remaining TTL that a waiter needs as its fallback timer, and
// its Lock waits by sleeping a random 50–250 ms between tries (16× a round
// trip, 373 ops/s contended). So each master here holds a hash
// {o: owner, n: holds, f: fence, a: attempt} under "<prefix>l:<key>" and
// the per-node steps are Lua scripts; the quorum, validity and
// release-on-failure logic is redsync's, and failures are reported with
// redsync's error types (*redsync.RedisError per node, *redsync.ErrTaken
// when a quorum is held by others) so callers can inspect them the same way.
//
// # Waiting
//
// Lock does not sleep on a schedule. It runs internal/wait's loop: one
// attempt, then a subscription to the key's release channel
// "<prefix>r:<key>", confirmed by a quorum of masters, then an attempt per
// release notification. Every release (Unlock, ForceUnlock, the undo of a
// failed attempt that had a quorum) publishes on each master from inside
// its script, so a quorum of subscriptions always hears of it; the copies
// from the several masters wake a waiter once. When no notification comes,
// the fallback timer is the time until enough of the holder's records
// expire for a quorum to be free (their PTTLs, read in the failed attempt).
//
// A release wakes the waiters of every client at once, and a crowd that
// attempts together splits the masters so that nobody wins. So a woken
// waiter first pauses a random part of one attempt's time; the first to
// go acquires on quiet masters and, having waited, announces its take on
// the channel, and the others skip their attempt and wait for its release.
// A take carries its fence and releases carry theirs, so a take heard
// after its own release is recognised as stale and ignored.
// When a split happens anyway (no owner has a quorum), each contender
// takes its minority back silently and retries after a random pause of up
// to two attempt times: nobody holds the key, so no release would come.
// # Fencing
//
// Each master keeps one counter per namespace ("<prefix>fence"), which
// only grows. A fresh grant increments it (or lifts it to the largest value
// the client has seen, which keeps lagging masters level) and records the
// new value; the lease's fence F is the largest value among the grants.
// Before Lock returns, F is known to be at or below the counter of a
// quorum of masters: either every master answered and a quorum of grants
// counted to F (the common case, one round trip; grants that counted lower
// learn F in the background), or a second round raises the counters to F,
// counts the masters where our record still stands, and needs a quorum of
// them. A later holder needs its own quorum of grants, which shares a
// master with that quorum; there its grant comes after ours ended and
// increments past F, and its fence is the largest value of its grants, so
// it is above F. Re-entry (WithOwner) reports the recorded F and counts
// holds; keep-alive re-writes F, healing a minority of masters.
//
// # What breaks the guarantees
//
// Redlock assumes bounded clock drift between masters, bounded network
// delay and no long process pauses (Kleppmann, "How to do distributed
// locking", 2016). A master whose clock jumps forward expires the record
// early; a client paused (GC, swapping) past its validity still believes
// it holds the lock while another owner takes it. Then two owners act at
// once: mutual exclusion is lost, and only a resource that checks the
// fence (rejecting any fence below one it has seen) stays safe, because
// the fence order itself survives clock jumps and pauses: F is durable on
// a quorum before Lock returns. What breaks the fence is a master losing
// its counter: restarted without its data (persistence off, or appendonly
// without fsync always) it counts from 0 again. Delaying such a restart by
// the longest TTL, as the Redlock description asks, saves mutual exclusion
// but not the fence. Never let masters replicate into one another.
package redsync
