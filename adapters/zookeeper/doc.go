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
// A lock node lives as long as its ZooKeeper session: a crashed holder's
// key is freed when the server expires the session, S after it last
// heard from it. So a lock with TTL t must live in a session with S <= t.
//
// A Locker from a URL without session_timeout derives S from each TTL: it
// keeps one session per rung of a ladder of powers of two seconds (1/8s,
// 1/4s, 1/2s, 1s, 2s, 4s, 8s, 16s, ...), and a lock with TTL t uses the
// session of the largest rung at most t (so t/2 < S <= t: WithTTL(3s) gets
// a 2s session, the default 15s TTL an 8s one). The server clamps every
// session timeout into [minSessionTimeout, maxSessionTimeout] (by default
// [2, 20] ticks, 4s–40s at tickTime 2s; scripts/backends: 1s–120s) and
// tells the client what it granted; the Locker learns the bounds from
// that: a rung the server raised reveals its minimum, one it lowered its
// maximum, and TTLs whose rung lies beyond a bound use the bound's
// session. A TTL below the server's minimum is refused with ErrInvalidTTL
// naming the minimum, before any node is created (the first such Lock
// learns the minimum by opening the session), as is one below 1/8s, the
// shortest timeout asked for. Sessions are opened lazily, the first
// time a TTL needs one (the default TTL's when the Locker is opened, which
// also serves Status, List and ForceUnlock), shared by every lock of their
// rung, and closed once no lock, waiter or hold has used them for a
// minute, or at Close; so a Locker has at most one session per power of
// two between the server's bounds (8 for 1s–120s). Each session connects
// to the URL's servers, so a proxy or partition in front of them cuts all
// of a Locker's sessions at once. Queue order is the nodes' sequence,
// whatever session made them, so FIFO holds across sessions.
//
// With session_timeout=S in the URL the Locker is pinned, as before this
// rule: one session of timeout S for every lock, and a TTL below S is
// refused with ErrInvalidTTL. New is always pinned to the caller's
// connection, whose timeout it is told with WithSessionTimeout (default
// 10s); a Locker from Open learns the granted value from go-zookeeper and
// uses it (the shorter of asked and granted for loss and validity, the
// longer for the TTL rule).
//
// Re-entry keeps the node, hence its session: re-entering with a TTL below
// that session's timeout is refused with ErrInvalidTTL. For every session:
//
//   - A kept-alive lease is valid for min(TTL, S/2) from the start of the
//     request that last proved the session alive (the acquire's, then each
//     refresh's: a check that the node exists and is our session's), and is
//     renewed every S/4, so Deadline never runs past what the session
//     guarantees: the server keeps a session S after it last heard from it.
//   - With keep-alive off the lease lasts its TTL, the node's planned life:
//     the adapter deletes the node at the deadline and the lease ends lost.
//     Its Deadline relies on the session monitor below, not on a refresh.
//   - The Locker probes each session every S/12. Once S/3 has passed since
//     the last request the server answered was sent, every lease in that
//     session ends lost (ErrLeaseLost), well before the server can expire
//     the session and hand the keys on, whether the connection closed or
//     went silent (go-zookeeper notices silence only after 2S/3). Their
//     nodes are deleted if the session comes back: go-zookeeper reconnects
//     to the same session after an outage shorter than S.
//   - An expired session, or a node deleted by ForceUnlock, ends its leases
//     lost at once through a watch on the holder's own node.
//
// # Cleanup
//
// A node no lease stands behind (a cancelled or failed Lock's, a create
// whose reply was lost, a lost hold's, one whose release failed at Close
// or at a keep-alive-off deadline) would reach the head of its queue and
// block the key for the rest of the session. Such orphans are deleted in
// the background, retried with backoff over disconnects and ErrNoServer
// for as long as their session is the connection's; the caller waits at
// most 2s, and Close waits for them within its own 5s bound.
//
// # Re-entry
//
// WithOwner re-entry is counted per Locker, like Curator's
// InterProcessMutex per process. The same owner through another Locker is
// another contender: its TryLock returns ErrLocked and its Lock waits in
// the queue, behind the first Locker's hold, until that is released — a
// goroutine that holds a key through one Locker and Locks it through
// another waits for itself. Re-entering another session's node would tie
// the second Locker's lease to a session it cannot keep alive or see
// expire, and its hold count to a node it does not own. Status reports a
// hold count only for this Locker's own holds (1 otherwise).
//
// # What breaks the guarantees
//
// A holder process paused (GC, SIGSTOP) for longer than S/2, whose
// session the server may expire while it cannot notice: a kept-alive
// lease's Deadline has then passed, but a keep-alive-off lease's has not;
// a local clock running more than about half again slower than the
// server's; other clients writing or deleting lock nodes; a Locker made
// with New and a WithSessionTimeout shorter than the connection's real
// timeout.
package zookeeper
