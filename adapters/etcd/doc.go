// Package etcd is the locker adapter for etcd v3 (go.etcd.io/etcd/client/v3).
// Importing it registers the URL schemes etcd:// and etcds:// (TLS) with
// locker.Open (see Open); New wraps an existing client.
//
// # Design
//
// Each key has a FIFO queue: etcd keys under prefix+escape(key)+"/", one
// per holder or waiter, ordered by create revision. The lowest holds the
// lock and its create revision is the fence (plus the key's offset, where
// its fences were raised for a Migration: driver.FenceFloorer, floor.go).
// An entry's value records its owner and the set of hold ids it carries
// (several with re-entry under WithOwner), so that a write retried after a
// lost reply applies once. An entry's name is the Locker's id and a number,
// and the Locker names its next entry of a queue as one it deleted itself:
// etcd keeps deleted keys in its index until a compaction, and a fresh name
// per entry made every range over the queue slower with each lock taken.
//
// An entry also records its mode (driver.ModeKeeper): it holds the key
// once every entry before it is compatible with it, so a shared request
// behind a waiting exclusive one waits (writers are not starved), and a
// waiter watches the last entry before it that its mode excludes. Subtree
// nodes queue under prefix+"%T" (no escaped key begins so); a subtree node
// granted after a wait takes as fence the revision of a write made then,
// since its create revision may be below the fence of a lock granted below
// it meanwhile.
//
// A semaphore's entry (locker.Limit(n), driver.Limiter) records its n, and
// holds once every entry before it is Limited with the same n and fewer
// than n precede it, holders and waiters alike (so waiters are served in
// arrival order, each grant fenced by its create revision, above every
// earlier one). Since any holder's release may admit the first waiter, a
// waiter watches the queue's deletions and counts off the entries before
// it, looking only once the count admits it. Mixing modes, or two n, on a
// key is refused with locker.ErrModeMismatch, as the first entry before
// the call's shows; a call that had queued first removes its entry again.
//
// Lock queues its entry at once, in every mode, reading the entries
// before it in the same txn (readers that come together each take one
// txn, and hold together), and waits for its predecessor alone (no herd;
// a semaphore's waiter hears its key's releases, but reads only once one
// admits it). A Locker's waiters near the head of a queue hear its
// changes through one watch (their client's: see below), kept 1 s past
// the last of them: etcd serves a watch set up while writes land late
// (every 100 ms), which with a watch per wait delayed one hand-off in
// fifty or so (queuewatch.go);
// one further back watches its predecessor alone. A waiter near the head
// holds the key, with no read, once the watch showed every entry before
// it that its mode excludes gone, its own not gone, and no entry
// rewritten since it queued (a fence raise rewrites one, so that a waiter
// reads the offset it raised); else a read at the revision heard decides.
// A hand-off is then the release's write and its watch event. A Locker's waits share one
// watch stream, kept open from its first wait until Close by a watch of a
// key nobody writes: the client closes a stream with its last watch, and
// a stream per wait cost the server more than the wait's txns. The
// Lockers that Open makes in one process on one URL (but for its path)
// share one client, and with it the watches of their waiters' queues, so
// that a queue's change reaches the process once; the client closes with
// the last of them.
// TryLock writes only into an empty queue, so a refusal leaves nothing. An
// entry whose removal fails is retried by a background sweep until it is
// gone or the Locker closes; one whose queueing txn got no answer, found
// missing when its call gave up, is looked for by the sweep for 30 s, as
// etcd may still apply that txn.
//
// Watch (driver.Watcher, for locker.Observe) is an etcd watch of the key's
// queue prefix, live once etcd confirms it: every grant, release and
// lease expiry writes or deletes an entry there, so no announcement is
// needed; a watch that breaks (a compaction) is set up again with backoff
// and then signals.
//
// # Leases
//
// Locks with keep-alive on share one etcd lease per Locker and TTL (in
// whole seconds): a lock and its unlock cost one txn each, with no Grant or
// Revoke. A lock with keep-alive off gets a lease of its own, so that it
// lapses at its TTL whatever the others do, and is revoked at its local
// deadline, since etcd rounds TTLs up. Deadline is never later than the
// last keep-alive's send time plus the TTL etcd granted. A TTL below a
// second is refused with locker.ErrInvalidTTL, before anything is written:
// a crashed holder's key would outlive it, its lease counting whole seconds.
//
// ForceUnlock deletes the holder's entry, not its shared lease; the holder's
// next refresh (within TTL/3) sees the entry gone and reports ErrLeaseLost.
//
// A Locker's kept-alive leases are renewed in batches
// (driver.BatchRefresher, renew.go): one keep-alive per etcd lease, then
// the entries read back in txns of up to 128 reads (etcd's default
// --max-txn-ops). 200 leases of a 2s TTL kept alive for 3×TTL cost about
// 35 calls when taken together (up to about 150 when taken one after
// another, their renewals spread over more ticks), where each renewing
// alone, with a keep-alive and a txn, costs about 3,400.
//
// # What breaks the guarantees
//
// Mutual exclusion holds as long as a holder does its work before
// Deadline: past it, etcd may have expired the lease (a paused process, a
// partition) and granted the key to the next waiter. Use Fence to make the
// protected resource reject late writers.
package etcd
