// Package locker is one API for distributed locks over Redis, Redlock,
// ZooKeeper, etcd and SQL databases.
//
// Pick a backend by URL, as database/sql picks a driver, after importing
// the adapters you want for their side effect:
//
//	import (
//		"github.com/locker-go/locker"
//		_ "github.com/locker-go/locker/adapters/etcd"
//		_ "github.com/locker-go/locker/adapters/redis"
//		_ "github.com/locker-go/locker/adapters/sql"
//	)
//
//	l, err := locker.Open(ctx, os.Getenv("LOCKER_BACKEND")) // e.g. redis://127.0.0.1:6379
//
// or wrap a client you already have with an adapter's New, e.g.
// redis.New(client).
//
// Every adapter is a small driver (package driver) under one portable
// Locker, New: validation, leases and their keep-alive, waiting for a
// notified release, Close and Admin are written once, here, and behave the
// same on every backend. A new backend implements driver.Driver and runs
// the conformance suite; adapters/mem is the reference driver.
//
// Every adapter keeps the same guarantees, checked by the conformance
// package: at most one live lease per key; a crashed holder's lock lapses
// within its TTL; only the owner releases; a fencing token (Lease.Fence)
// that grows with every change of owner; a lost lease is noticed (Done,
// Err); waiting is driven by backend notifications, never a fixed poll
// (SQLite between processes, which has none, backs off within the holder's
// expiry); a Lock abandoned by its context leaves nothing behind; keys are
// opaque strings. Redis, PostgreSQL, ZooKeeper and etcd also serve waiters
// first come, first served.
//
// Beyond one exclusive key, every backend offers shared (read) leases
// (Shared), subtree locks that cover a '/'-separated path and everything
// below it (Subtree), and several keys taken all or none (LockAll), with
// the same leases, fences and guarantees. They are built here, once, from
// the driver's lock modes (driver.ModeKeeper: multiple-granularity locking
// with intention modes) and batches (driver.Batcher).
//
// A lease is kept alive by default (renewed every TTL/3). Work that must
// not outlive the lease should watch Lease.Done, or run inside Do, whose
// context ends when the lease is lost. Pass Lease.Fence to the resource you
// protect, so that it can reject writes from a holder that was paused past
// its lease: no lock service can prevent that pause, a fence can.
package locker
