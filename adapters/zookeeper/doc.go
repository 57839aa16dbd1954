// Package zookeeper is the locker adapter for Apache ZooKeeper (3.5+), on
// github.com/go-zookeeper/zk. Importing it registers the scheme
//
//	zk://[user:pass@]host:port[,host:port...]/root[?session_timeout=10s]
//
// (root defaults to /locker, port to 2181). With user:pass every session
// authenticates with the digest scheme and every node it creates carries
// zk.DigestACL(zk.PermAll, user, pass), so only holders of that password
// can see or release the locks. New wraps a connection you made.
//
// # Recipe
//
// Key k has a container node /root/<escape(k)>, which the server deletes
// once its last child is gone. Escaping percent-encodes '/', '%', a
// leading '.' and the runes ZooKeeper refuses, so every key is one node
// name and key prefixes stay name prefixes (List). A contender creates an
// ephemeral-sequential child "_c_<guid>-lock-<seq>" holding its owner; the
// lowest sequence holds the lock. The GUID lets a create whose reply was
// lost be found again rather than left to block the key (the orphan that
// deadlocks the go-zookeeper and Curator recipes). A waiter watches its
// predecessor, and the node before that while the predecessor is not yet
// first, so a release wakes at most two clients and a handoff costs no
// further round trip. Its watches, and those on its own node, are set by
// a read (GetW), which, unlike ExistsW, leaves no watch on a node already
// gone: ZooKeeper would keep that one until a node of its name is made,
// for a sequential name never. A Lock that ends without the key deletes its node,
// also when its create was still in flight.
//
// The node is made in a multi that also writes the key node, whose Stat
// it returns: with no other child, the Lock holds the key after that one
// round trip (two with the listing, as go-zookeeper's and Curator's
// recipes take), its fence the key node's new mzxid, our node's czxid;
// the watch on our node is set 50 ms later, if it is still held (most
// locks are not). The multi also makes and deletes the key's fence
// offset node (below), so it fails on a key that has one, whose nodes are
// then made with a plain create. Where the server refuses the multi
// otherwise (no right to delete under the root), every node is made with
// a plain create from then on.
//
// Lock modes (driver.ModeKeeper): a node's name carries its mode before
// "-lock-" ("_c_<guid>-S-lock-<seq>"; none for exclusive, so that a client
// of an earlier version takes every node for an exclusive one). A node
// holds once every node before it is compatible with it; a waiter in a
// shared or intention mode watches the last node before it that its mode
// excludes. Subtree paths have key nodes of their own, "%T<escape(path)>"
// (no escaped key begins with "%T"), and a subtree node granted after a
// wait takes as fence the zxid of a write to it made then, since its czxid
// may be below the fence of a lock granted below it meanwhile.
//
// Semaphores (driver.Limiter, locker.Limit(n)): a Limited node carries its
// n in its tag ("_c_<guid>-L3-lock-<seq>"), so one listing shows every
// node's n, and holds once every node before it is Limited of the same n
// and fewer than n precede it: waiters are served in sequence order.
// Another mode or n behind a Limited holder, or a Limit behind another
// mode's holder, is ErrModeMismatch, found in the listing that follows
// the create, and the node is deleted again. A Limited waiter watches the
// last n nodes before it (any of them may free a slot), not one.
//
// Fence is the lock node's czxid. Holders take the key in creation order,
// so the fence strictly increases, also after the key's container was
// reaped and made again. Re-entry keeps the node, hence the fence. A key
// whose fences were raised (driver.FenceFloorer, for a Migration) adds
// its offset, kept in a persistent node "%F<key node>" beside the key
// nodes (see floor.go).
//
// Status: a subtree holder's fence is its node's mzxid, which a key's
// first raise moves (it writes the queue's nodes), and with the key's
// offset as of the call: after a raise, it shows above the holder's.
//
// Watch (driver.Watcher, for locker.Observe) keeps a children watch on
// the key node through the Locker's first session, set again after each
// event (an exists-watch while the node is missing or reaped): every
// grant, release and expired holder changes its children, so the Locker
// needs no announcements of its own.
//
// # Sessions and TTLs
//
// A lock node lives as long as its session: a crashed holder's key is
// freed when the server expires the session, S after it last heard from
// it. So a lock with TTL t must live in a session with S <= t.
//
// A Locker from a URL without session_timeout keeps one session per rung
// of powers of two seconds (1/8s, 1/4s, ..., 8s, 16s, ...), opened the
// first time a TTL needs it and closed after a minute unused; a lock with
// TTL t uses the largest rung at most t (WithTTL(3s) gets a 2s session,
// the default 15s TTL an 8s one). The server clamps timeouts into
// [minSessionTimeout, maxSessionTimeout] and says what it granted; the
// Locker learns the bounds from that, and refuses a TTL below the minimum,
// or below 1/8s, with ErrInvalidTTL before creating any node. Queue order
// is the nodes' sequence, whatever session made them, so FIFO holds.
//
// With session_timeout=S the Locker is pinned to one session of timeout S,
// and a TTL below S is refused. New is pinned to the caller's connection,
// whose timeout it is told with WithSessionTimeout (default 10s). A Locker
// from Open uses the timeout the server granted (the shorter of asked and
// granted for loss and validity, the longer for the TTL rule).
//
//   - A kept-alive lease is valid for min(TTL, S/2) from the start of the
//     request that last proved the session alive, and is renewed every S/4.
//   - With keep-alive off the lease lasts its TTL: the node is deleted at
//     the deadline.
//   - Each session is probed every S/12; once S/3 has passed since the
//     last answered request was sent, its leases end lost, well before the
//     server can expire the session and hand the keys on. Their nodes are
//     deleted if the session comes back.
//   - An expired session, or a node deleted by ForceUnlock, ends its
//     leases lost at once through a watch on the holder's own node.
//
// Nodes no lease stands behind (a cancelled Lock's, a lost hold's, one
// whose release failed) are deleted in the background, retried with
// backoff for as long as their session lives; a call waits for that at
// most 2s, Close within its own bound.
//
// # Re-entry
//
// WithOwner re-entry is counted per Locker (by the portable Locker, as
// Curator's InterProcessMutex counts per process) and needs a TTL of at
// least the node's session timeout. The same owner through another Locker
// is another contender: it waits in the queue behind the first Locker's
// hold. Status reports a hold count only for this Locker's own holds.
//
// # What breaks the guarantees
//
// A holder paused (GC, SIGSTOP) for longer than S/2, whose session the
// server may expire while it cannot notice (a keep-alive-off lease's
// Deadline has then not passed); a local clock running more than about
// half again slower than the server's; other clients writing or deleting
// lock nodes; New with a WithSessionTimeout shorter than the connection's.
package zookeeper
