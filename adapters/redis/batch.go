package redis

import (
	"context"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// AcquireBatch runs the batch script once: every request granted, or none
// (see batchScript). On a cluster whose prefix has no hash tag the keys lie
// in several slots, which one script cannot reach: it declines
// (driver.ErrSkip), and the Locker takes them one by one.
func (d *redisDriver) AcquireBatch(ctx context.Context, rs []*driver.Request) ([]driver.Grant, error) {
	if _, cluster := d.client.(*goredis.ClusterClient); cluster && !hashTagged(d.prefix) {
		return nil, driver.ErrSkip
	}
	if err := d.raiseFor(ctx, rs...); err != nil {
		return nil, err
	}
	ttl := max(rs[0].TTL.Milliseconds(), 1)
	keys := []string{d.fenceKey()}
	args := []any{rs[0].Owner, ttl}
	calls := make([]string, len(rs))
	for i, r := range rs {
		calls[i] = d.sub.token(r.ID)
		keys = append(keys, d.keys(r.Space, r.Key)...)
		args = append(args, int(r.Mode), calls[i])
	}
	res, err := batchScript.Run(ctx, d.client, keys, args...).Int64Slice()
	if err != nil {
		return nil, backendErr(ctx, err)
	}
	gs := make([]driver.Grant, len(rs))
	switch res[0] {
	case -1:
		return nil, mismatch(rs[res[1]-1], res[2])
	case 0:
		gs[res[1]-1].Retry = time.Duration(res[2]) * time.Millisecond
		return gs, nil
	}
	for i, r := range rs {
		gs[i] = driver.Grant{Fence: uint64(res[i+1]), Hold: d.hold(r, calls[i], ttl)}
	}
	return gs, nil
}

// hashTagged reports whether prefix holds a Redis Cluster hash tag ("{x}"),
// which puts every key beginning with it in one slot.
func hashTagged(prefix string) bool {
	open := strings.IndexByte(prefix, '{')
	return open >= 0 && strings.IndexByte(prefix[open+1:], '}') > 0
}

// ReleaseBatch drops the holds in one script, in order (see
// releaseBatchScript); a hold of another driver declines the batch.
func (d *redisDriver) ReleaseBatch(ctx context.Context, hs []driver.Hold) ([]error, error) {
	if _, cluster := d.client.(*goredis.ClusterClient); cluster && !hashTagged(d.prefix) {
		return nil, driver.ErrSkip
	}
	keys := make([]string, 0, 4*len(hs))
	args := []any{d.wakePrefix()}
	for _, dh := range hs {
		h, ok := dh.(*hold)
		if !ok || h.d != d {
			return nil, driver.ErrSkip
		}
		keys = append(keys, d.keys(h.space, h.key)...)
		args = append(args, h.owner, int(h.mode), h.id)
	}
	res, err := releaseBatchScript.Run(ctx, d.client, keys, args...).Int64Slice()
	if err != nil {
		for _, dh := range hs {
			dh.(*hold).unsure = true // the lease serialises its releases
		}
		return nil, backendErr(ctx, err)
	}
	errs := make([]error, len(hs))
	for i, dh := range hs {
		if res[i] == 0 && !dh.(*hold).unsure { // after a lost reply, a hold gone is our release
			errs[i] = locker.ErrNotHeld
		}
	}
	return errs, nil
}

var _ driver.BatchRefresher = (*redisDriver)(nil)

// RefreshBatch renews the holds in one script (see refreshBatchScript).
// A hold of another driver is declined (driver.ErrSkip), as is every hold
// on a cluster whose prefix has no hash tag.
func (d *redisDriver) RefreshBatch(ctx context.Context, hs []driver.Hold) ([]driver.Refreshed, error) {
	out := make([]driver.Refreshed, len(hs))
	_, cluster := d.client.(*goredis.ClusterClient)
	var keys []string
	var args []any
	var mine []int
	for i, dh := range hs {
		h, ok := dh.(*hold)
		if !ok || h.d != d || (cluster && !hashTagged(d.prefix)) {
			out[i].Err = driver.ErrSkip
			continue
		}
		mine = append(mine, i)
		keys = append(keys, d.keys(h.space, h.key)[:2]...)
		args = append(args, h.owner, int(h.mode), h.ttl, h.id)
	}
	if len(mine) == 0 {
		return out, nil
	}
	res, err := refreshBatchScript.Run(ctx, d.client, keys, args...).Int64Slice()
	if err != nil {
		return nil, backendErr(ctx, err)
	}
	for j, i := range mine {
		if res[j] == 0 {
			out[i].Err = locker.ErrNotHeld
		} else {
			out[i].Valid = time.Duration(hs[i].(*hold).ttl) * time.Millisecond
		}
	}
	return out, nil
}
