// Package sql is the lock-table adapter: locks are rows of one table in
// PostgreSQL, MySQL or MariaDB, or SQLite, reached through gorm
// (gorm.io/driver/postgres, gorm.io/driver/mysql, and
// github.com/libtnb/sqlite over modernc.org/sqlite, a pure-Go SQLite without cgo).
//
// Import it for its side effect to make locker.Open know the schemes
// postgres://, postgresql://, mysql:// and sqlite://, or call New with a
// *gorm.DB:
//
//	l, err := locker.Open(ctx, "sqlite:///var/lib/app/locks.db")
//	l, err := locker.Open(ctx, "postgres://user:pass@db:5432/app?sslmode=require")
//	l, err := locker.Open(ctx, "mysql://user:pass@db:3306/app")
//
// # URLs
//
// postgres:// and postgresql:// URLs go to pgx as they are (every pgx
// parameter works), except for table=NAME, which this package takes. A
// sqlite URL names a file by an absolute path, sqlite:///abs/path.db, or by
// one relative to the working directory, sqlite:rel/path.db (sqlite://name.db
// is refused: "name.db" would be a host). The file is created on first use;
// its directory must exist. The only SQLite parameter is table=NAME.
// mysql://user:password@host[:port]/db[?param=value...] becomes the DSN of
// github.com/go-sql-driver/mysql, whose parameters it passes on, with
// interpolateParams=true unless given (one round trip per statement, not a
// prepare, an execute and a close).
//
// # Schema
//
// New creates, if missing, one table (default locker_locks; WithTable) and
// the fence source beside it:
//
//	locker_locks (
//	    key        text PRIMARY KEY,   -- COLLATE "C" on Postgres: byte order
//	    owner      text NOT NULL,      -- the lease's owner token
//	    fence      bigint NOT NULL,    -- fencing token of the current owner
//	    holds      integer NOT NULL,   -- re-entry count of a WithOwner lease
//	    ids        text NOT NULL,      -- ' id1 id2 ': one id per hold
//	    expires_at timestamptz NOT NULL -- SQLite, MySQL: bigint Unix milliseconds
//	)
//	Postgres: SEQUENCE locker_locks_fence
//	          TABLE locker_locks_queue (key, token, seq, expires_at): waiters
//	SQLite:   TABLE locker_locks_fence (id, v): a counter row kept by triggers
//	MySQL:    TABLE locker_locks_fence (id, v): a counter row (key and owner
//	          are VARBINARY(512): byte order)
//	          TABLE locker_locks_queue (key, token, seq, expires_at, proc): waiters,
//	          proc naming the waiter's process's park (or '')
//	          TABLE locker_locks_park (key, proc, conn): the connection each
//	          process parks for a key; the lock table gains parked (a
//	          process parked on the key: its release wakes the first)
//
// A row lives while its lock is held, or until its expired lock is taken
// over in place.
//
// Shared and subtree locks (lock modes) add, beside each lock table:
//
//	locker_locks_hold (key, owner, mode, fence, holds, ids, expires_at, lim):
//	          the Shared, Limited and intention holders, one row per owner
//	          and mode; lim is a Limited holder's n (0 for the others)
//	locker_locks_queue gains mode (0, Exclusive, for the rows written
//	          before) and lim (a Limited waiter's n); SQLite gains the
//	          queue table
//	locker_locks_tree, …_tree_hold, …_tree_queue, …_tree_fence (and on
//	          MySQL …_tree_park): the Subtree space, made on its first use
//
// A table made by an earlier version gains the columns it lacks when a
// Locker opens it (lim: 0, as no earlier version kept limits).
//
// While a key has holders other than an Exclusive one, its row in the
// lock table is a header (empty owner), lapsing with the last of them: the
// Exclusive statements find the key held and need no change, and clients
// of an earlier version keep out. A Shared or intention request, and an
// Exclusive waiter on SQLite, is decided in Go by driver.ModeKeeper's rule
// in one transaction that first serializes the key with every other change
// to it (Postgres: the acquire statement's advisory lock; MySQL: the key's
// row; SQLite: the database's write lock), and draws its fence from the
// same counter as the Exclusive statements. On Postgres and MySQL the
// commonest of them (a new holder that the holders and waiters before it
// admit, and a release) are one call of a routine the schema adds
// (PL/pgSQL functions locker_locks_grant_v6, which also refuses and keeps
// a waiter's place, and locker_locks_release_v8; MySQL procedures
// locker_locks_grant_v3 and locker_locks_release_v4, which need CREATE
// ROUTINE once and EXECUTE: without them, the transaction serves every
// call, as correct and slower). On Postgres the Exclusive release and
// expiry take the same lock, in locker_locks_xrelease_v9 and
// locker_locks_xexpire_v1, so that the waiters they serve include a
// Shared one placed while they ran.
//
// # Semaphores
//
// The driver keeps limits (driver.Limiter): a locker.Limit(n) request is
// decided by driver.Limiter's rule, on Postgres and MySQL in one call of a
// routine of its own (locker_locks_grantlim_v1, which declines a mismatch,
// a re-entry or lapsed rows to collect, for the modal transaction), and
// its release too; on SQLite in the modal transaction. The other modes'
// lane declines a request meeting Limited holders. Its holders are rows of the holders table in
// mode Limited with lim = n, covered by the header as Shared holders are;
// a request of another n, a Limited one meeting other holders, or another
// mode's meeting Limited holders (the Exclusive statements' refusal reads
// whether they are Limited) fails with locker.ErrModeMismatch, for any
// owner. A new holder is granted while fewer than n hold, counting the
// live Limited waiters queued before it, and draws its fence from the
// table's counter. On Postgres a release grants the Limited waiters it
// admits (the first n - holders of them) in its hand-off function, each
// told its fence by NOTIFY, as other modes' waiters are; a modal
// transaction's release, an expiry or an abandon wakes them, and they
// look; where waiters poll, those of its process (up to n at the head of its
// queue may look), and on SQLite the first to look takes its slot and
// hands the process's others admitted then theirs in the same
// transaction. A polling Limited waiter first reads, taking no lock,
// whether the slots are taken, and runs the transaction only if not (or
// to keep its place). Once the last Limited holder has gone, the key's n
// is forgotten with it.
//
// # Guarantees
//
// Acquire is one statement, INSERT … ON CONFLICT (key) DO UPDATE … WHERE the
// row has expired or is the same owner's, RETURNING the fence: no
// read-then-write window. Expiry is judged by the database's clock, never
// by clients'. Refresh and release match key, owner, fence and the hold's
// id, so a lease never extends or frees a lock that passed to someone else
// (even to an earlier lease of the same WithOwner identity), and a statement
// retried after a lost reply applies once.
//
// A Locker's kept-alive leases renew together (driver.BatchRefresher): the
// Exclusive holds due on one tick, up to 1,000, in one statement with
// refresh's match, so each is extended exactly as its own Refresh would
// extend it. Postgres: UPDATE … FROM json_to_recordset($1) … RETURNING;
// SQLite: UPDATE … FROM json_each($1) … RETURNING; MySQL: an UPDATE joined
// to a derived table of the holds, and a read of their rows only if it
// changed fewer rows than it had holds (a longer expiry left, or a hold
// lost). A key held twice in one batch costs a statement more; Shared and
// intention holds renew alone, each in its own transaction.
//
// MySQL and MariaDB return no rows from writes, so there an acquire is a
// few single statements, none holding a lock past itself: an INSERT claims
// a free key unless a live waiter is queued ahead of the caller (the
// primary key lets one claim in), a fence is drawn from the counter row,
// and an UPDATE gives it to the claim if the claim is still the caller's;
// a refused attempt is the failed INSERT and one read (which also keeps a
// waiter's place). Where the connection takes several statements at once
// (multiStatements=true, which Open sets), each of these goes in one round
// trip. A call that does not queue claims a free key by one call of a
// procedure the schema adds (locker_locks_claim_v2: the same look at the
// queue and autocommitted writes, one statement and one answer), whatever
// the connection; without it, by the statements.
// Expiry there, too, is the server's clock (UTC_TIMESTAMP, whatever the
// session's time zone). Every statement autocommits; at the default
// REPEATABLE READ a claim's INSERT … SELECT locks the queue's places it
// looks at, so that a waiter queuing meanwhile waits for the claim, and
// then finds its row.
//
// Fences never go backwards and have gaps. On Postgres they come from a
// SEQUENCE drawn under a transaction-scoped advisory lock on (table, key),
// so in the order acquisitions land; on SQLite, whose writes are serial,
// from the counter row; on MySQL from the counter row, drawn after the key
// is claimed.
//
// # Waiting
//
// Postgres waiters queue, first come first served: a Lock LISTENs (one
// dedicated pgx connection that a process's Lockers on one pool and table
// share, re-established with backoff; once it is up, a Lock's first
// attempt already queues), and keeps a place in the queue table, expiring
// a TTL ahead and renewed while it waits. A free key goes only to the
// first live waiter (TryLock and new Locks queue behind live waiters; a
// same-owner re-entry does not), so a crashed waiter delays the others by
// at most its TTL. A release hands the key over: in the same call it
// grants the waiters at the head of the queue that it admits (the first
// writer, or the run of readers), each with its own TTL, and NOTIFYs each
// its fence, so the waiter holds the key once it hears, with no statement
// of its own (locker_locks_handoff_v5); a waiter in the releasing
// process has its grant from the release's answer, without waiting for
// the NOTIFY to come round. Its lease's validity counts from
// the start of its last attempt that found it waiting; should the
// notification be lost, its next attempt finds the hold under its ID, and
// a waiter that gives up releases a hold handed to it meanwhile. A call
// that gives up while an attempt's statement is on its way waits for its
// answer, up to a second (landing), so that the undo of its place or
// claim comes after it on the server: cut off at once, it could land
// after the undo, a place keeping the others out until it lapsed (a
// claim that lands so is given back: Lock returns ctx's error). Waiting
// holds no connection: the Lockers of a process opened on one URL share one
// handle of at most 16 pooled connections, on which their waiters and
// holders take turns statement by statement, so 400 Lockers cost 17
// connections, not 400 or more.
//
// SQLite has no notification between processes. Lockers of one process on
// the same file and table share wake-ups, and take turns at the file, so
// they never meet SQLITE_BUSY among themselves. Their waiters for a key
// queue in the process, first come first served: only the first looks at
// the file, on a backoff of 2 ms doubling to 50 ms (never later than the
// holder's expiry), to hear other processes' releases; a release in the
// process wakes the first at once, or hands it the key: a release (or any
// call that lets waiters in) grants, in its own transaction, the waiters
// of its process that it admits at the head of the queue, and each takes
// its grant with no statement. 400 waiters in one process cost one
// poller, and take the key in arrival order; waiters of different
// processes get no order among them.
//
// MySQL waiters queue in the database as Postgres waiters do, first come
// first served across processes: a place in the queue table, expiring a
// TTL ahead and kept while the waiter waits, and a free key goes only to
// the first live waiter. MySQL has no LISTEN/NOTIFY; a release reaches
// the waiters of its own process through the process (the Lockers on one
// pool and table: waiters line up in the queue's order, the first is woken
// at once, the others only keep their places, a TTL/3 apart; none polls
// while the key is held here), and those
// of other processes through a park: the process's first waiter for a key
// held elsewhere parks a connection the process keeps for parks, waiting
// in GET_LOCK for a name another of its connections holds (the anchor;
// not SLEEP, whose KILL MariaDB may take 2 s to land), recorded in the park table, with the process's name in its waiters'
// places, with the owner and TTL of the hold each asks for. A release
// (locker_locks_xrelease_v4) grants the key, in its transaction, to the
// first live waiter if it is Exclusive and of a parking process, and
// interrupts, once that is committed, the park of that waiter's process
// (KILL QUERY, only on a connection holding the named lock of parks):
// that process alone is woken, its gate reads the grant and hands it to
// the waiter, who takes it with no statement of its own. A release that
// cannot grant (the first waiter modal, or of a process that does not
// park or of an earlier version) leaves the key free and interrupts the
// park of the process whose waiter is first, and that waiter claims it.
// A park waits only while an Exclusive holder other than its process's
// first waiter (a release may have granted that one the key before the
// park began) keeps the key, or, the key free, another process's parking
// waiter comes first, and while
// its park row is there (a release takes the row before its KILL), which
// the statement that sleeps asks,
// so that no release falls between the look and the sleep; a park sends
// its statements one at a time, as a KILL between two statements of one
// query leaves the driver waiting for the rest for good; a waiter behind
// modal holders or waiters polls. A release of a hold that did not wait,
// on a row that no parking waiter marked, is one plain DELETE, as before.
// Parks cost a connection per key a process waits for (outside the pool's
// idle ones, within MaxOpenConns; at most half the pool) and two idle.
// A KILL is run as the procedure's definer, so a process parks only where it is that user (a
// process of another user, or without the procedure, watches names, as
// below, and its waiters are woken by the releases of processes that do
// the same; between the two kinds a waiter looks on its own schedule);
// a connection that parked never goes back to the pool, where a late KILL
// could cut another statement short (such a cut is retried as a lost
// connection's would be).
//
// Where a process does not park, it watches a named lock per key
// (GET_LOCK), which MySQL hands to the longest waiter when its holder
// lets it go. A process's first waiter for a key held elsewhere watches
// the name: a pooled
// connection blocks in GET_LOCK (at most half the pool's connections at a
// time; a waiter past that polls). The process that then gets the key
// keeps the name while it holds the key and lets it go once its release
// has deleted the row; the server grants the name to the process that has
// watched longest, which reads the queue's first waiter in the same round
// trip and wakes it if it is its own, or hands the name on at once. The
// name only wakes: the row and the queue decide. A holder that got the
// key without waiting holds no name, so the first watcher gets it at once
// and polls on SQLite's backoff (one failed INSERT and one read) until the
// key is its own, keeping the name for the next hand-off; a paused
// holder's name outlasts its row, and its watchers look again on their
// waiters' schedule, a TTL/3 apart. Chosen over a polled row, which
// answers a release only at its next poll (10-50 ms, and a round trip per
// waiter per poll), and over GET_LOCK as the lock itself, which lives only
// as long as one connection and has no fence, no TTL and no re-entry. A
// named lock costs a connection for each key this process waits for or
// holds after waiting; the hand-off costs a round trip more than
// LISTEN/NOTIFY's (the name is let go after the row's DELETE), and the
// name goes to the processes in the order they asked for it, not the
// queue's: each that gets it with no waiter first hands it on, which
// parking does not (8 processes on one key: 180-200 hand-offs a second
// watching names, 260-300 parked, 2026-12-02).
//
// Within a process, a release of an Exclusive hold hands the key over
// (where the schema's procedures could be made): one procedure call takes
// the row from the holder and gives it, with a fresh fence, to this
// process's first waiter if that waiter is also the queue's first live
// one, and takes its place out of the queue; the waiter is told in the
// process and takes its grant with no statement of its own, valid from
// before the release began. The key stays this process's, so its name
// stays too, and no other process is woken. Under contention in one
// process this is a third of the statements per hand-off, and a third
// less of the server's CPU.
//
// # Errors
//
// Transient failures (serialization failure, deadlock, lost or refused
// connections, SQLITE_BUSY/SQLITE_LOCKED) are retried with backoff within
// the caller's deadline and at most WithRetryTimeout (default 5s); then
// they, and other failures, wrap locker.ErrUnavailable. A call that fails
// after its acquire may have landed takes that hold back.
//
// # What breaks the guarantees
//
//   - Expiry trusts the database server's wall clock (the machine's, for
//     SQLite): a forward jump ends leases early, maybe while their holders,
//     timing by monotonic clocks, still think them valid.
//   - A Postgres failover to an asynchronous replica can lose recent
//     commits, and with them granted locks; so can a MySQL failover to an
//     asynchronous (or semi-synchronous, after a timeout) replica. A MySQL
//     server keeps every lock across a crash only with
//     innodb_flush_log_at_trx_commit=1 (2: across a crash of the server
//     process, not of the machine).
//   - On SQLite, synchronous=NORMAL (set by the opener, with WAL) may lose
//     the last commits on power loss. The file must be on a local disk:
//     SQLite locking over network file systems is unreliable.
//   - A hold whose acquire failed ambiguously and whose undo failed too
//     (the database unreachable for WithRetryTimeout) stays until its TTL.
//   - New with a *gorm.DB on SQLite does not set WAL or a busy timeout on
//     the caller's connections: set them in the DSN as the opener does.
package sql
