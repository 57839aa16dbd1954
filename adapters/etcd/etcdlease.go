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
	d         *etcdDriver
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
	_, err := e.d.shared1(ctx, "ka/"+strconv.FormatInt(int64(e.id), 16), func(ctx context.Context) (any, error) {
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
func (d *etcdDriver) shared1(ctx context.Context, name string, fn func(context.Context) (any, error)) (any, error) {
	ch := d.flight.DoChan(name, func() (any, error) { return fn(context.WithoutCancel(ctx)) })
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (e *etcdLease) keepAlive(ctx context.Context) error {
	sent := time.Now()
	rctx, cancel := e.d.rpc(ctx)
	defer cancel()
	resp, err := e.d.client.KeepAliveOnce(rctx, e.id)
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
func (d *etcdDriver) grant(ctx context.Context, ttl time.Duration, dedicated bool) (*etcdLease, error) {
	secs := int64(math.Ceil(ttl.Seconds()))
	sent := time.Now()
	rctx, cancel := d.rpc(ctx)
	defer cancel()
	resp, err := d.client.Grant(rctx, secs)
	if err != nil {
		return nil, err
	}
	granted := time.Duration(resp.TTL) * time.Second
	return &etcdLease{d: d, id: resp.ID, granted: granted, dedicated: dedicated, expiry: sent.Add(granted)}, nil
}

// revoke drops a dedicated lease and with it the entry it carries.
func (e *etcdLease) revoke(ctx context.Context) {
	e.markDead()
	rctx, cancel := e.d.rpc(ctx)
	defer cancel()
	_, _ = e.d.client.Revoke(rctx, e.id) // best effort: it lapses by itself otherwise
}

// leaseFor returns the etcd lease a new entry with these options goes on.
// Locks with keep-alive on share one lease per TTL in whole seconds, so a
// lock costs no Grant or Revoke; a lock with keep-alive off gets a lease
// of its own, so that it lapses at its TTL whatever the others do.
func (d *etcdDriver) leaseFor(ctx context.Context, ttl time.Duration, keepAlive bool) (*etcdLease, error) {
	if !keepAlive {
		return d.grant(ctx, ttl, true)
	}
	secs := int64(math.Ceil(ttl.Seconds()))
	for {
		d.mu.Lock()
		e := d.shared[secs]
		d.mu.Unlock()
		if e == nil || e.remaining() <= 0 {
			v, err := d.shared1(ctx, "grant/"+strconv.FormatInt(secs, 10), func(ctx context.Context) (any, error) {
				return d.grantShared(ctx, secs)
			})
			if err != nil {
				return nil, err
			}
			e = v.(*etcdLease)
		}
		if err := e.ensure(ctx, ttl*2/3); !errors.Is(err, errLeaseGone) {
			return e, err
		}
		d.forget(e)
	}
}

// grantShared grants the shared lease of secs, unless a call just before
// it in the flight did.
func (d *etcdDriver) grantShared(ctx context.Context, secs int64) (*etcdLease, error) {
	d.mu.Lock()
	cur := d.shared[secs]
	d.mu.Unlock()
	if cur != nil && cur.remaining() > 0 {
		return cur, nil
	}
	n, err := d.grant(ctx, time.Duration(secs)*time.Second, false)
	if err == nil {
		d.mu.Lock()
		d.shared[secs] = n
		d.mu.Unlock()
	}
	return n, err
}

// forget drops a dead shared lease so that the next lock grants a new one.
func (d *etcdDriver) forget(e *etcdLease) {
	e.markDead()
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, v := range d.shared {
		if v == e {
			delete(d.shared, k)
		}
	}
}

// sharedByID returns this driver's shared lease id, if it is one.
func (d *etcdDriver) sharedByID(id clientv3.LeaseID) *etcdLease {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.shared {
		if e.id == id {
			return e
		}
	}
	return nil
}
