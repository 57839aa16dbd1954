// Package etcd is the locker adapter for etcd v3 (go.etcd.io/etcd/client/v3).
// Importing it registers the URL schemes etcd:// and etcds:// (TLS) with
// locker.Open; New wraps an existing client.
//
// # Design
//
// Each key K has a queue: the etcd keys prefix+escape(K)+"/"+random, one
// per holder or waiter, where escape percent-encodes '%' and '/' so that a
// queue's range holds only K's entries ("a" never sees "a/b" or "ab").
// Entries are ordered by create revision; the lowest holds the lock. Its
// create revision is the fence, so fences increase with every new owner.
// The value records the owner and the set of lease ids holding the entry
// (more than one with re-entry under WithOwner): a set, not a count, so
// that adding or dropping a hold is idempotent and a write retried after a
// lost reply (a retried Unlock) never drops another lease's hold.
//
// Lock puts its entry and reads the last entry before it in one txn (one
// round trip uncontended), then waits only for the deletion of that
// immediate predecessor: no herd. The watch starts at the server's current
// revision, never a past one, since a watch that starts behind goes through
// etcd's unsynced-watcher path and costs up to 100 ms per handoff (this is
// why concurrency.Mutex manages 81 handoffs/s); a read covers any revisions
// between the last read and the watch's start. (etcd 3.4 still makes a
// watch unsynced when a write commits while it registers: under constant
// writes a few handoffs in a hundred take that path.) After the predecessor goes,
// one read confirms that our entry, hence our etcd lease, is still alive
// (etcd issue 11456) and that no earlier entry remains. TryLock creates its
// entry only if the queue is empty (a txn comparing the whole range), so a
// refused TryLock writes nothing. A cancelled Lock deletes its entry before
// returning, in a context of its own; a hold whose removal fails (that
// delete, a re-entry whose reply was lost, an expiry while etcd was out of
// reach) is retried by a background sweep with backoff until it is gone or
// the Locker closes, since its entry sits on a shared etcd lease that the
// Locker's other locks keep alive and would block the key meanwhile.
//
// # Leases
//
// Locks with keep-alive on share one etcd lease per Locker and TTL (rounded
// up to whole seconds): a lock costs one txn and its unlock one txn, with no
// Grant or Revoke. The lease is kept alive while any of those locks or
// waiters needs it (refreshes every TTL/3, shared between them), and lapses
// on its own when none does; a Locker that crashes loses all its locks at
// once after the TTL. A lock with keep-alive off gets a lease of its own, so
// that it lapses at its TTL whatever the others do; when the local deadline
// passes it is revoked at once, since etcd rounds TTLs up (to at least 2s
// with default election settings). Deadline is never later than the last
// keep-alive's send time plus the TTL etcd granted, nor than the TTL.
//
// ForceUnlock deletes the holder's entry, not its shared lease; the holder's
// next refresh (within TTL/3) sees the entry gone and reports ErrLeaseLost.
//
// # What breaks the guarantees
//
// Mutual exclusion holds as long as a holder does its work before
// Deadline: past it, etcd may have expired the lease (a paused process, a
// partition) and granted the key to the next waiter. Use Fence to make the
// protected resource reject late writers.
package etcd
