package etcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// etcdLease is one etcd lease that queue entries are attached to.
type etcdLease struct {
	d         *etcdDriver
	id        clientv3.LeaseID
	granted   time.Duration // the TTL the server granted (whole seconds, >= its minimum)
	dedicated bool          // carries one keep-alive-off lock; revoked when that ends
	turn      chan struct{} // one keep-alive at a time; those waiting use its result
	// expiry (a time.Time) is a lower bound of the server-side expiry: the
	// send time of the last grant or keep-alive plus the TTL the server
	// answered. The zero time: the server is known to have dropped it.
	expiry atomic.Value
}

func (e *etcdLease) expires() time.Time {
	t, _ := e.expiry.Load().(time.Time)
	return t
}

// gone marks the lease dropped by the server, so no one relies on it.
func (e *etcdLease) gone() { e.expiry.Store(time.Time{}) }

// ensure keeps the lease alive so that it is known to live at least need
// from now; it makes no call while that already holds.
func (e *etcdLease) ensure(ctx context.Context, need time.Duration) error {
	if time.Until(e.expires()) >= need {
		return nil
	}
	if err := e.takeTurn(ctx); err != nil {
		return err
	}
	defer func() { <-e.turn }()
	if time.Until(e.expires()) >= need { // the keep-alive we waited for did it
		return nil
	}
	return e.keepAlive(ctx)
}

// keepAlive renews the lease once; errLeaseGone if the server dropped it.
// It runs under e.turn, so expiry has one writer but gone.
func (e *etcdLease) keepAlive(ctx context.Context) error {
	sent := time.Now()
	rctx, cancel := e.d.rpc(ctx)
	defer cancel()
	resp, err := e.d.client.KeepAliveOnce(rctx, e.id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		e.gone()
		e.d.Warn("locker/etcd: the Locker's etcd lease expired or was revoked; the locks on it are lost",
			"lease", fmt.Sprintf("%x", int64(e.id)))
		return errLeaseGone
	}
	if err != nil {
		return err
	}
	e.extend(sent.Add(time.Duration(resp.TTL) * time.Second))
	return nil
}

// takeTurn waits for e.turn (the one writer of expiry but gone), or ctx.
// The caller gives it back with <-e.turn.
func (e *etcdLease) takeTurn(ctx context.Context) error {
	select {
	case e.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// extend records that the lease is known to live until t, if that is
// later than known. It runs under e.turn.
func (e *etcdLease) extend(t time.Time) {
	if t.After(e.expires()) {
		e.expiry.Store(t)
	}
}

// adopt takes on what from, another value for the same etcd lease (a
// re-entry's), has just learned by a keep-alive: that the lease is gone
// (errLeaseGone), or a later expiry. It runs under e.turn, as keepAlive.
func (e *etcdLease) adopt(ctx context.Context, from *etcdLease) error {
	if e == from {
		return nil
	}
	if err := e.takeTurn(ctx); err != nil {
		return err
	}
	defer func() { <-e.turn }()
	t := from.expires()
	if t.IsZero() {
		e.gone()
		return errLeaseGone
	}
	e.extend(t)
	return nil
}

// errLeaseGone: the server no longer has the lease (expired or revoked).
var errLeaseGone = errors.New("locker/etcd: etcd lease expired or revoked")

// grant creates a lease of at least ttl, rounded up to whole seconds.
func (d *etcdDriver) grant(ctx context.Context, ttl time.Duration, dedicated bool) (*etcdLease, error) {
	sent := time.Now()
	rctx, cancel := d.rpc(ctx)
	defer cancel()
	resp, err := d.client.Grant(rctx, int64(math.Ceil(ttl.Seconds())))
	if err != nil {
		return nil, err
	}
	e := &etcdLease{d: d, id: resp.ID, granted: time.Duration(resp.TTL) * time.Second, dedicated: dedicated, turn: make(chan struct{}, 1)}
	e.expiry.Store(sent.Add(e.granted))
	return e, nil
}

// revoke drops a lease and with it the entries it carries.
func (e *etcdLease) revoke(ctx context.Context) {
	e.gone()
	rctx, cancel := e.d.rpc(ctx)
	defer cancel()
	_, _ = e.d.client.Revoke(rctx, e.id) // best effort: it lapses by itself otherwise
}

// leaseFor returns the etcd lease a new entry goes on, known to live two
// thirds of ttl: the shared one of its TTL with keep-alive, else one of
// its own (see the package doc).
func (d *etcdDriver) leaseFor(ctx context.Context, ttl time.Duration, keepAlive bool) (*etcdLease, error) {
	if !keepAlive {
		return d.grant(ctx, ttl, true)
	}
	secs := time.Duration(math.Ceil(ttl.Seconds())) * time.Second
	for {
		e, err := d.sharedLease(ctx, secs)
		if err != nil {
			return nil, err
		}
		if err := e.ensure(ctx, ttl*2/3); !errors.Is(err, errLeaseGone) {
			return e, err
		}
	}
}

// sharedLease returns the live shared lease of secs, granting it if need
// be. One caller at a time, so that callers racing share one grant.
func (d *etcdDriver) sharedLease(ctx context.Context, secs time.Duration) (*etcdLease, error) {
	select {
	case d.granting <- struct{}{}:
		defer func() { <-d.granting }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e := d.shared[secs]; e != nil && time.Now().Before(e.expires()) {
		return e, nil
	}
	e, err := d.grant(ctx, secs, false)
	if err == nil {
		d.shared[secs] = e
	}
	return e, err
}

// minTTL is the least TTL etcd honours: its leases count whole seconds,
// so that a crashed holder's key would outlive a shorter TTL.
const minTTL = time.Second

// checkTTL refuses a request whose TTL etcd cannot honour.
func checkTTL(rs ...*driver.Request) error {
	for _, r := range rs {
		if r.TTL < minTTL {
			return fmt.Errorf("%w: TTL %v is below etcd's least lease TTL, %v (leases count whole seconds, and the server would keep a crashed holder's key that long): lock with WithTTL(%v) or more",
				locker.ErrInvalidTTL, r.TTL, minTTL, minTTL)
		}
	}
	return nil
}
