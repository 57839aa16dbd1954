package etcd

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdLease is one etcd lease that queue entries are attached to, with a
// local lower bound of its server-side expiry: the send time of the last
// grant or keep-alive plus the TTL the server answered.
type etcdLease struct {
	l         *Locker
	id        clientv3.LeaseID
	granted   time.Duration // the TTL the server granted (whole seconds, >= its minimum)
	dedicated bool          // carries one keep-alive-off lock; revoked when that ends

	mu     sync.Mutex
	expiry time.Time
	dead   bool
}

// remaining is how long the lease is known to live, from now.
func (e *etcdLease) remaining() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dead {
		return 0
	}
	return time.Until(e.expiry)
}

func (e *etcdLease) expires() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.expiry
}

func (e *etcdLease) markDead() {
	e.mu.Lock()
	e.dead = true
	e.mu.Unlock()
}

// ensure keeps the lease alive so that it is known to live at least need
// from now; it makes no call while that already holds. Concurrent callers
// share one keep-alive. It returns errLeaseGone once the server has dropped
// the lease.
func (e *etcdLease) ensure(ctx context.Context, need time.Duration) error {
	if e.remaining() >= need {
		return nil
	}
	_, err := e.l.shared1(ctx, "ka/"+strconv.FormatInt(int64(e.id), 16), func(ctx context.Context) (any, error) {
		if e.remaining() >= need { // a call that just finished did it
			return nil, nil
		}
		return nil, e.keepAlive(ctx)
	})
	return err
}

// shared1 runs fn once for all concurrent callers with the same name (in a
// ctx of its own, bounded by the request timeout), while each caller waits
// only as long as its own ctx allows.
func (l *Locker) shared1(ctx context.Context, name string, fn func(context.Context) (any, error)) (any, error) {
	ch := l.flight.DoChan(name, func() (any, error) { return fn(context.WithoutCancel(ctx)) })
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (e *etcdLease) keepAlive(ctx context.Context) error {
	sent := time.Now()
	rctx, cancel := e.l.rpc(ctx)
	defer cancel()
	resp, err := e.l.client.KeepAliveOnce(rctx, e.id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		e.markDead()
		return errLeaseGone
	}
	if err != nil {
		return err
	}
	e.mu.Lock()
	if d := sent.Add(time.Duration(resp.TTL) * time.Second); d.After(e.expiry) {
		e.expiry = d
	}
	e.mu.Unlock()
	return nil
}

// errLeaseGone: the server no longer has the lease (expired or revoked).
var errLeaseGone = errors.New("locker/etcd: etcd lease expired or revoked")

// grant creates a lease of at least ttl, rounded up to whole seconds.
func (l *Locker) grant(ctx context.Context, ttl time.Duration, dedicated bool) (*etcdLease, error) {
	secs := int64(math.Ceil(ttl.Seconds()))
	sent := time.Now()
	rctx, cancel := l.rpc(ctx)
	defer cancel()
	resp, err := l.client.Grant(rctx, secs)
	if err != nil {
		return nil, err
	}
	granted := time.Duration(resp.TTL) * time.Second
	return &etcdLease{l: l, id: resp.ID, granted: granted, dedicated: dedicated, expiry: sent.Add(granted)}, nil
}

// revoke drops a dedicated lease and with it the entry it carries.
func (e *etcdLease) revoke(ctx context.Context) {
	e.markDead()
	rctx, cancel := e.l.rpc(ctx)
	defer cancel()
	_, _ = e.l.client.Revoke(rctx, e.id) // best effort: it lapses by itself otherwise
}

// leaseFor returns the etcd lease a new entry with these options goes on.
//
// Locks with keep-alive on share one lease per Locker and TTL (in whole
// seconds): a lock costs no Grant or Revoke, and the lease lives as long as
// some lock or waiter of this Locker keeps it alive. A lock with keep-alive
// off gets a lease of its own, so that it lapses at its TTL whatever the
// others do.
func (l *Locker) leaseFor(ctx context.Context, ttl time.Duration, keepAlive bool) (*etcdLease, error) {
	if !keepAlive {
		return l.grant(ctx, ttl, true)
	}
	secs := int64(math.Ceil(ttl.Seconds()))
	for {
		l.mu.Lock()
		e := l.shared[secs]
		l.mu.Unlock()
		if e != nil && e.remaining() > 0 {
			err := e.ensure(ctx, ttl*2/3)
			if err == nil {
				return e, nil
			}
			if !errors.Is(err, errLeaseGone) {
				return nil, err
			}
		}
		v, err := l.shared1(ctx, "grant/"+strconv.FormatInt(secs, 10), func(ctx context.Context) (any, error) {
			l.mu.Lock()
			cur := l.shared[secs]
			l.mu.Unlock()
			if cur != e && cur != nil && cur.remaining() > 0 {
				return cur, nil // another caller replaced it meanwhile
			}
			n, err := l.grant(ctx, time.Duration(secs)*time.Second, false)
			if err != nil {
				return nil, err
			}
			l.mu.Lock()
			l.shared[secs] = n
			l.mu.Unlock()
			return n, nil
		})
		if err != nil {
			return nil, err
		}
		if n := v.(*etcdLease); n.remaining() > 0 {
			return n, nil
		}
	}
}

// forget drops a dead shared lease so that the next lock grants a new one.
func (l *Locker) forget(e *etcdLease) {
	e.markDead()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, v := range l.shared {
		if v == e {
			delete(l.shared, k)
		}
	}
}
