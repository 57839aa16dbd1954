// Package sql is the lock-table adapter: locks are rows of one table in
// PostgreSQL or SQLite, reached through gorm (gorm.io/driver/postgres, and
// github.com/glebarez/sqlite, a pure-Go SQLite without cgo).
//
// Import it for its side effect to make locker.Open know the schemes
// postgres://, postgresql:// and sqlite://, or call New with a *gorm.DB:
//
//	l, err := locker.Open(ctx, "sqlite:///var/lib/app/locks.db")
//	l, err := locker.Open(ctx, "postgres://user:pass@db:5432/app?sslmode=require")
//
// # URLs
//
// postgres:// and postgresql:// URLs go to pgx as they are (every pgx
// parameter works), except for table=NAME, which this package takes. A
// sqlite URL names a file by an absolute path, sqlite:///abs/path.db, or by
// one relative to the working directory in the opaque form sqlite:rel/path.db;
// sqlite://name.db is refused, since "name.db" would be a URL host. The file
// is created on first use; its directory must exist. The only SQLite
// parameter is table=NAME.
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
//	    expires_at timestamptz NOT NULL -- SQLite: integer Unix milliseconds
//	)
//	Postgres: SEQUENCE locker_locks_fence
//	          TABLE locker_locks_queue (key, token, seq, expires_at): waiters
//	SQLite:   TABLE locker_locks_fence (id, v) with one counter row, kept
//	          by triggers on locker_locks, plus a trigger deleting a row
//	          whose holds reach 0
//
// A row exists only while its lock is held or until its expired lock is
// taken over in place; released locks delete their rows.
//
// # Acquire, release, expiry
//
// Acquire is one statement, INSERT … ON CONFLICT (key) DO UPDATE … WHERE the
// row has expired or is the same owner's, RETURNING the fence: there is no
// read-then-write window. Expiry is judged by the database's clock
// (Postgres clock_timestamp(); SQLite's, which is the local clock), never
// by clients' clocks. Refresh and release touch the row only where key,
// owner, fence and the hold's id all match, so a lease can never extend or
// free a lock that passed to someone else, even to an earlier lease of the
// same WithOwner identity, and a statement retried after a lost reply
// applies once.
//
// # Fencing
//
// Fences come from one counter per table that never goes backwards. On
// Postgres it is a SEQUENCE; the acquire statement first takes a
// transaction-scoped advisory lock on (table, key), so fences of one key are
// drawn in the order acquisitions land (nextval is drawn before an INSERT's
// conflict check). Failed attempts burn values: fences have gaps. On
// SQLite, every write is serialized, and triggers advance a counter row.
//
// # Waiting
//
// Postgres waiters queue, first come first served. A Lock whose first
// attempt fails starts listening, then queues: each later attempt takes or
// refreshes its place (its call's id, with an expiry TTL ahead, renewed at
// least every TTL/3 while it waits) in the queue table. A free key goes
// only to the first live waiter (TryLock and new Locks too queue behind
// live waiters; a same-owner re-entry does not), so a crashed waiter delays
// the others by at most its TTL. The statement that frees a key calls
// pg_notify(table, token) for the first live waiter only. A Lock that
// gives up leaves the queue, waking the next waiter if the key is free.
// Each Locker keeps one dedicated pgx connection that LISTENs on the
// table's channel (from the first Lock that has to wait; re-established
// with backoff if it drops, and then every waiter looks again). Every
// Locker receives every release of the table.
//
// SQLite has no notification between processes. Within a process, Lockers
// on the same file and table share a hub, so a release wakes that
// process's waiters at once, and take turns through a process-wide gate,
// so they never meet SQLITE_BUSY among themselves. Waiters in other
// processes wake on a backoff of 2 ms doubling to 50 ms, never later than
// the holder's expiry.
//
// # Errors
//
// Transient failures (serialization failure 40001, deadlock 40P01, lost or
// refused connections, SQLITE_BUSY/SQLITE_LOCKED) are retried with backoff
// within the caller's deadline, and at most WithRetryTimeout (default 5s);
// then they, and other failures, wrap locker.ErrUnavailable. A call that
// fails after its acquire may have landed takes that hold back.
//
// # What breaks the guarantees
//
//   - Expiry trusts the database server's wall clock: a forward jump of it
//     (or of the machine's, for SQLite) ends leases early, possibly while
//     their holders, timing by monotonic clocks, still think them valid.
//   - A Postgres failover to an asynchronous replica can lose recent
//     commits, and with them locks that were granted.
//   - On SQLite, synchronous=NORMAL (set by the opener, with WAL) may lose
//     the last commits on power loss. The file must be on a local disk:
//     SQLite locking over network file systems is unreliable.
//   - A hold whose acquire failed ambiguously and whose undo also failed
//     (the database unreachable for WithRetryTimeout) stays until its TTL.
//   - New with a *gorm.DB on SQLite does not set WAL or a busy timeout on
//     the caller's connections: set them in the DSN as the opener does.
package sql
