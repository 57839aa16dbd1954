// Package etcd is the locker adapter for etcd v3 (go.etcd.io/etcd/client/v3).
// Importing it registers the URL schemes etcd:// and etcds:// (TLS) with
// locker.Open; New wraps an existing client.
//
// # Design
//
// Each key K has a queue: the etcd keys prefix+escape(K)+"/"+random, one
// per holder or waiter, ordered by create revision; the lowest holds the
// lock and its create revision is the fence. escape percent-encodes '%'
// and '/', so a queue's range holds only K's entries. An entry's value
// records its owner and the set of hold ids it carries (several with
// re-entry under WithOwner): a set, so that a write retried after a lost
// reply applies once.
//
// Lock puts its entry and reads its predecessor in one txn, then watches
// that predecessor alone (no herd), from the server's current revision
// (see waitTurn). TryLock creates its entry only if the queue is empty, so
// a refused TryLock writes nothing. A failed Lock deletes its entry; a
// hold whose removal fails is retried by a background sweep until it is
// gone or the Locker closes, since its entry sits on a shared etcd lease
// that the Locker's other locks keep alive.
//
// # Leases
//
// Locks with keep-alive on share one etcd lease per Locker and TTL (in
// whole seconds): a lock costs one txn and its unlock one txn, with no
// Grant or Revoke. The lease lives while any of those locks or waiters
// refreshes it, and lapses on its own when none does. A lock with
// keep-alive off gets a lease of its own, so that it lapses at its TTL
// whatever the others do, and it is revoked once its local deadline
// passes, since etcd rounds TTLs up. Deadline is never later than the last
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
