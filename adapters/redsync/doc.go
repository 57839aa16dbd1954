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
// left, else the attempt is undone wherever it may have landed. A round
// ends as soon as a quorum's replies decide it (a grant, not Limited, by
// a quorum that drew one counter; a release by a quorum, a slot's by as
// many masters as grant one, so that the slot is free to the next), so a stalled
// master costs a call nothing; the others' replies are dealt with in the
// background (a late grant is given the fence, and a release reaches its
// master only after it). An attempt or a release whose ctx ends
// mid-round does not cut its scripts off either: the attempt grants
// nothing then, and waits for their replies (up to the node timeout)
// before it undoes what landed, so that no undo overtakes its script and
// leaves a hold or a mark behind. Other calls end with their ctx. A Lock
// (not a TryLock) whose round a quorum left unanswered tries again after a
// random delay, as Redlock says, up to three rounds in a row before it
// reports locker.ErrUnavailable: a burst of waiters or a stalled machine
// is not an outage.
// Lease.Deadline is start + TTL − drift, drift = TTL×0.01 + 2 ms; a TTL
// that leaves no validity after the drift and a node timeout is refused.
// Unlike redsync's bare token, each master records every holder with its
// owner, holds and fence, for fencing, re-entry and the holders' remaining
// TTLs; node errors are redsync's *RedisError.
//
// # Modes, subtree paths and batches
//
// The driver keeps modes (driver.ModeKeeper): shared, exclusive and the
// intention modes of subtree locks. On each master a key has an anchor, a
// hash under "<prefix>l:<key>" (a subtree path's under "<prefix>t:<path>",
// a space of its own), which holds the exclusive holder and every
// holder's fence and holds, and a sorted set per shared or intention mode
// of its holders by expiry; one script applies driver.ModeKeeper's rule
// there, reading only the modes that could refuse the request (so a
// subtree's top node with 10,000 intention holders costs no more than
// with one), and evicting what lapsed as it meets it. A grant, in any
// mode, needs a quorum of masters granting it, as an exclusive one always
// did (a semaphore's, more: below); re-entry is per mode, and an owner
// asking for its key in another mode is refused with
// locker.ErrModeMismatch when a quorum says so.
// Subtree locks (locker.Subtree) are intention holders on a path's
// ancestors and a holder on the path, taken together. Semaphores
// (locker.Limit, driver.Limiter) are a fifth mode, Limited: each master
// admits a Limited request while its holders and the Limited waiting
// marks before it are fewer than n, keeps the holders' n on the anchor,
// and answers any other n or mode with a mismatch, whoever the owner; a
// grant on more than n·N/(n+1) masters is a grant, and a renewal on as
// many keeps it (a majority would not do: requests that reach the masters
// in different orders could each gather one, seen once as 4 holders of a
// Limit(3); so of 5 masters a Limit(2) or (3) needs 4, a Limit(4) or more
// all 5), fenced as a shared one, and a quorum of
// mismatches locker.ErrModeMismatch, everything taken on the way given
// back. Each Limited holder's release wakes the waiters up to the last
// that the free slots admit. The scripts need
// Redis 6.2 or later (ZADD GT).
//
// Nothing queues on the masters, so writers are kept from starving by
// waiting marks: a Lock that waits marks its place on every master with
// its mode at each refused attempt (renewed every TTL/3; a mark lapses a
// TTL after its last renewal), and a request that a mark placed before it
// excludes is refused, as a request that a holder excludes is: a reader
// arriving behind a waiting writer waits behind it. A mark goes when its
// Lock gets the key (from every master) or gives up (Abandon). Marks are
// ordered by a stamp the client takes from its clock at the call's first
// queued attempt and sends to every master, so that they stand in one
// order on all of them and a waiter first on some is first on all (were
// each master to order by arrival, three waiters could each be first on a
// minority, for ever). Skewed client clocks bend this order, never mutual
// exclusion.
//
// Batches (driver.Batcher): LockAll and a subtree lock take their keys in
// one script per master, which grants all of them or none; the batch is
// granted where a quorum granted it all, and undone elsewhere. A subtree
// lease lets its nodes go in one script per master too.
//
// # Notification
//
// A master publishes on the key's channel, "<prefix>r:<key>" (a subtree
// path's "<prefix>rt:<path>"), when a key's last holder of a mode leaves
// (a waiter may then be admitted; while others of its mode stay, none
// can), and when a waiting mark is removed, naming the key's first
// waiting mark then. A waiting Locker subscribes to its namespace's
// channels on every master, and counts as subscribed while a quorum of
// those is live. It wakes the longest waiter of each mode for a key once
// a quorum of masters published the release (the first copy alone would
// send it to masters that still have the holder), or shortly after the
// first copy if no quorum comes; a waiter after the named first waiter,
// whose mode that waiter's excludes, stays put until the next release or
// its marks' renewal. With no notification a waiter looks again when
// enough of what refused it expires. A call that tries again without a
// place among the waiters (a grant that arrived dead, say) first pauses a
// random part of its last attempt's time: a crowd trying at once would
// split the masters.
//
// # Hand-offs
//
// A release hands the key on: a waiting Exclusive call (with no owner of
// WithOwner's and no fence floor) pends, beside its mark on each master
// that refuses it, the hold it asks for; an Exclusive holder's release
// that leaves the key free on a master grants that hold there to the
// first mark, if it pends one, and tells the waiter's Locker alone (a
// channel of its own, "<prefix>h:<id>"). The waiter holds the key once a
// quorum of the masters that refused its last attempt handed it that
// hold: no round of its own. Its grant starts when that attempt began,
// plus the least time the hold was pending on those masters (by their
// clocks, less the drift rate), so no record ends before its Deadline;
// its fence is settled as an attempt's. The release of a handed hold,
// and the end of a waiter that gave up (Abandon), drop every hold the
// call pended (each attempt pends a new one: a master its last attempt
// missed hands an earlier one) and take the call's marks in the same
// script, so that a master whose release comes late hands the key to the
// next waiter instead. A call that missed the news (a Locker's first
// wait returns once a quorum of its subscriptions is live) meets its
// handed hold at its next attempt and is granted there afresh; an
// attempt undone on a minority hands the key on where a waiter is
// marked. A mark not renewed for half its TTL is not handed the key (a
// waiter renews it every TTL/3): a dead waiter's keeps the key from the
// others no longer than before, until it lapses. A Limited holder's
// release hands its slot the same way, to the first mark if it is a
// Limited call's of the holders' Limit and the slot is the key's last free
// one (with more free, the waiters look); the waiter holds it once more
// than n·N/(n+1) masters handed it (quorumOf, as for any Limited grant),
// woken as their copies come, and attempts as before if a copy is still
// missing 5 ms after the first. Any other waiter keeps
// to the protocol above. With Redis ACLs, a user needs the hand-off
// channels, "<prefix>h:*", beside the release channels, "<prefix>r*".
//
// # Fences
//
// Each master keeps one counter per namespace ("<prefix>fence"), for
// both spaces (so a subtree lock's fence rises across its whole tree),
// that only grows; a shared or exclusive grant counts it up, and its
// fence is the largest count of its grants (an intention holder's fence
// is never a lease's: it draws none). Before Lock returns the fence is at
// or below the counter of a quorum (a second round raises them if
// needed), so a later holder's quorum, which shares a master with it,
// counts past it. Holders that hold a key together (readers) never share
// a fence: each master records the largest fence given on the key, and a
// fence set in that second round must be above it, on a quorum. A master
// restarted without its data starts its counter again from its clock in
// microseconds, above any fence it gave, so fences do not go back.
//
// # Data from an earlier version
//
// Versions before modes kept one hash per plain key under the same name,
// "<prefix>l:<key>", its owner in field o, and the same fence counter. The
// names were kept, so that old and new clients on the same masters exclude
// each other during a rolling upgrade rather than hold a key at once
// unseen: this version takes an old record (o set) for an exclusive holder
// (it never marks it, and Status and ForceUnlock see it), and writes o = ""
// on its own anchors, which an old client takes for another owner's lock.
// Fences go on from the same counters. Two limits until every client is
// upgraded: old clients leave no waiting marks (they may pass waiting
// writers, as all waiters did before), and an old client's subtree lock
// (which held the path's top segment as a plain key) does not meet this
// version's subtree locks. Old admin tools show new locks as held by "".
// A client of a version before semaphores does not see Limited holders
// (they are kept apart from the other modes'): use Limit on a prefix once
// every client of it is of this version.
//
// # What breaks the guarantees
//
// Redlock assumes bounded clock drift, network delay and process pauses
// (Kleppmann, "How to do distributed locking", 2016). A master whose clock
// jumps forward expires the record early; a client paused past its validity
// still believes it holds the lock. Then only a resource that checks the
// fence stays safe: the fence order survives both, being durable on a
// quorum before Lock returns. Delaying a master's restart without its data
// by the longest TTL keeps mutual exclusion. Never let masters replicate
// into one another.
package redsync
