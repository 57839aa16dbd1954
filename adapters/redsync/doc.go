// Package redsync is the Redlock adapter of locker: one lock held on a
// majority of N independent Redis masters (N odd, at least 3), so that
// locking and unlocking keep working while a minority of masters is down.
//
//	l, err := redsync.New([]goredis.UniversalClient{c1, c2, c3, c4, c5})
//	// or, configuration-driven:
//	l, err := locker.Open(ctx, "redlock://h1:6379,h2:6379,h3:6379,h4:6379,h5:6379")
//
// It is a driver under locker.New, which does the validation, leases,
// keep-alive and waiting; this package holds the Redlock rounds.
//
// # The algorithm
//
// Each attempt follows Redlock as go-redsync/redsync's Mutex runs it: note
// the start time; run one atomic script on every master in parallel, each
// bounded by a per-node timeout (a twentieth of the TTL, within 50 ms–1 s,
// unless WithNodeTimeout pins one; see NodeTimeout); succeed
// if a quorum (N/2+1) granted and time is left; on failure, undo the attempt
// on every master that granted or did not answer. The lease is valid until
// start + TTL − drift, drift = TTL×0.01 + 2 ms (redsync's drift factor plus
// Redlock's allowance for PX resolution): that is Lease.Deadline. A TTL
// that leaves no validity after the drift and a node timeout is refused.
//
// redsync's Mutex stores a bare random token with SET NX: no fencing token,
// no re-entry, no holder's remaining TTL for a waiter's fallback timer, and
// waits of a random 50–250 ms. So each master here holds a hash {o: owner,
// n: holds, f: fence, a: attempt} under "<prefix>l:<key>" and the per-node
// steps are Lua scripts; the quorum, validity and undo logic is redsync's,
// as are the error types (*redsync.RedisError per node).
//
// # Waiting
//
// A refused Lock subscribes to the key's release channel "<prefix>r:<key>"
// on every master and goes on once a quorum confirmed. Every release
// (Unlock, ForceUnlock, the undo of a failed attempt that had a quorum)
// publishes on each master from inside its script, so a quorum of
// subscriptions always hears of it; the masters' copies wake a waiter once.
// Without a notification, a waiter tries again when enough of the holder's
// records (their PTTLs, read in the refused attempt) expire to free a quorum.
//
// A release wakes the waiters of every client at once, and a crowd that
// attempts together splits the masters so that nobody wins. So a woken
// waiter first pauses a random part of its last attempt's time; the first
// to go acquires on quiet masters and announces its take on the channel,
// and the others skip their attempt and wait for its release. Takes and
// releases carry fences, so a take heard after its own release is ignored.
// A split that happens anyway is taken back silently by every contender,
// who retries after a random pause of up to two attempt times.
//
// # Fencing
//
// Each master keeps one counter per namespace ("<prefix>fence"), which only
// grows. A fresh grant increments it (or lifts it to the largest value the
// client has seen, keeping lagging masters level) and records the value;
// the fence F is the largest among the grants. Before Lock returns, F is at
// or below the counter of a quorum: either every master answered and a
// quorum of grants counted to F (one round trip; the others learn F in the
// background), or a second round raises the counters to F and needs our
// record to stand on a quorum. A later holder's quorum shares a master with
// that one, where its grant counts past F, so its fence is above F.
// Re-entry (WithOwner) reports the recorded F; keep-alive re-writes F.
//
// # What breaks the guarantees
//
// Redlock assumes bounded clock drift, network delay and process pauses
// (Kleppmann, "How to do distributed locking", 2016). A master whose clock
// jumps forward expires the record early; a client paused past its validity
// still believes it holds the lock. Then only a resource that checks the
// fence stays safe: the fence order survives clock jumps and pauses, being
// durable on a quorum before Lock returns. A master restarted without its
// data (persistence off, or appendonly without fsync always) starts its
// counter again from its clock in microseconds, above any fence it gave,
// so fences do not go back; delaying its restart by the longest TTL keeps
// mutual exclusion. Never let masters replicate into one another.
package redsync
