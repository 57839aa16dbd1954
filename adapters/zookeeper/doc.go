// Package zookeeper is the locker adapter for Apache ZooKeeper (3.5+), on
// github.com/go-zookeeper/zk. Importing it registers the scheme
//
//	zk://[user:pass@]host:port[,host:port...]/root[?session_timeout=10s]
//
// (root defaults to /locker, port to 2181). With user:pass the connection
// authenticates with the digest scheme and every node it creates carries
// zk.DigestACL(zk.PermAll, user, pass), so only holders of that password
// can see or release the locks. New wraps a connection you made.
//
// # Recipe
//
// Key k has a parent node /root/<escape(k)>, created as a container node:
// the server deletes it once its last child is gone, so released keys leave
// nothing behind. Escaping percent-encodes '/', '%', a leading '.' and the
// runes ZooKeeper refuses, so every key is one distinct node name and key
// prefixes stay name prefixes (List). A contender creates an
// ephemeral-sequential child "_c_<guid>-lock-<seq>" holding its owner; the
// lowest sequence holds the lock. The GUID makes the create "protected": if
// its reply is lost to a disconnect, the node is found again by name rather
// than left to block every later contender (the orphan that deadlocks the
// go-zookeeper and Curator recipes).
//
// # Waiting
//
// A waiter watches only its predecessor, plus the node before that while
// the predecessor is not yet first, and lists the queue again when the
// latter goes. Once a listing shows the predecessor first, the
// predecessor's deletion alone makes the waiter the holder (later nodes
// have higher sequences), so a handoff costs one server write and its
// notification, and a release wakes at most two clients. Every call honours
// the context (go-zookeeper's calls take none: the adapter stops waiting
// for them); a Lock that ends without the key deletes its node before
// returning, also when its create was still in flight.
//
// # Fence
//
// Fence is the lock node's czxid, the zxid of the transaction that created
// it. Zxids grow with every write to the ensemble. Holders take the key in
// queue order, which is creation order, so each new holder's node was
// created after its predecessor's: the fence strictly increases, also
// after the key's container was reaped and made again. Re-entry keeps the
// node, hence the fence.
//
// # Sessions and TTLs
//
// A Locker is one ZooKeeper session; its timeout S is fixed when the
// connection is made (URL session_timeout, default 10s; for New pass
// WithSessionTimeout with the value given to zk.Connect). The server clamps
// S into [minSessionTimeout, maxSessionTimeout], by default [2, 20] ticks
// (4s–40s at tickTime 2s; scripts/backends: 1s–120s): ask for a value inside
// them. The lock lives as long as the session, so the rule is:
//
//   - Lock and TryLock refuse a TTL below S with ErrInvalidTTL: a crashed
//     holder's key is freed when the server expires its session, after S,
//     and S <= TTL keeps the promise that it is free within the TTL.
//     Open the Locker with session_timeout no longer than your shortest TTL.
//   - Keep-alive checks every TTL/3 that the node still exists and belongs
//     to our session. With keep-alive off, the adapter deletes the node at
//     the deadline and the lease ends lost.
//   - A disconnect keeps the leases: go-zookeeper reconnects to the same
//     session. If the connection stays without a session for S/4, every
//     lease of the Locker ends lost (ErrLeaseLost), before the server can
//     expire the session (it gives a silent session S from the last ping,
//     and go-zookeeper notices silence after 2S/3), and its nodes are deleted
//     if the session comes back. An expired session, or a node deleted by
//     ForceUnlock, ends its leases lost at once through a watch on the
//     holder's own node.
//
// # Re-entry
//
// WithOwner re-entry is counted per Locker (per session), like Curator's
// InterProcessMutex per process: the same owner through another Locker is
// another contender. Status reports a hold count only for this Locker's
// own holds (1 otherwise).
//
// # What breaks the guarantees
//
// A server that clamps S above the Locker's TTLs (the crash bound is then
// S); a holder process paused (GC, SIGSTOP) for longer than S, whose
// session the server expires while it cannot notice; other clients
// writing or deleting lock nodes.
package zookeeper
