// Package redsync is the Redlock adapter of locker: one lock held on a
// majority of N independent Redis masters (N odd, at least 3), so that
// locking and unlocking keep working while a minority of masters is down.
//
//	l, err := redsync.New([]goredis.UniversalClient{c1, c2, c3, c4, c5})
//	// or, configuration-driven:
//	l, err := locker.Open(ctx, "redlock://h1:6379,h2:6379,h3:6379,h4:6379,h5:6379")
//
// Each attempt is Redlock as go-redsync/redsync's Mutex runs it: a script
// on every master in parallel, each bounded by a node timeout (NodeTimeout,
// or WithNodeTimeout); success if a quorum (N/2+1) granted and time is
// left, else the attempt is undone wherever it may have landed.
// Lease.Deadline is start + TTL − drift, drift = TTL×0.01 + 2 ms; a TTL
// that leaves no validity after the drift and a node timeout is refused.
// Unlike redsync's bare token, each master's record (a hash under
// "<prefix>l:<key>") carries owner, holds and fence, for fencing, re-entry
// and the holder's remaining TTL; node errors are redsync's *RedisError.
//
// Every release publishes on the key's channel "<prefix>r:<key>" on each
// master. A waiting Locker subscribes to its namespace's channels on every
// master, and counts as subscribed while a quorum of those is live. With
// no notification a waiter looks again when enough of the holder's records
// expire. So that a woken crowd does not split the masters and nobody win,
// a woken waiter first pauses a random part of its last attempt's time, and
// the first to take the key announces it so the others skip their attempt;
// a split that happens anyway is undone, and retried after a random pause.
//
// Fences: each master keeps a counter per namespace ("<prefix>fence") that
// only grows; a grant counts it up and the fence is the largest count of
// the grants. Before Lock returns the fence is at or below the counter of
// a quorum (a second round raises them if needed), so a later holder's
// quorum, which shares a master with it, counts past it.
//
// # What breaks the guarantees
//
// Redlock assumes bounded clock drift, network delay and process pauses
// (Kleppmann, "How to do distributed locking", 2016). A master whose clock
// jumps forward expires the record early; a client paused past its validity
// still believes it holds the lock. Then only a resource that checks the
// fence stays safe: the fence order survives both, being durable on a
// quorum before Lock returns. A master restarted without its data starts
// its counter again from its clock in microseconds, above any fence it
// gave, so fences do not go back; delaying its restart by the longest TTL
// keeps mutual exclusion. Never let masters replicate into one another.
package redsync
