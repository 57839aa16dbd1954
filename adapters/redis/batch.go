package redis

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// AcquireBatch runs the batch script once: every request granted, or none
// (see batchScript). On a cluster whose prefix has no hash tag the keys lie
// in several slots, which one script cannot reach: it declines
// (driver.ErrSkip), and the Locker takes them one by one; so it does Limited
// requests of several Limits (the script takes one).
func (d *redisDriver) AcquireBatch(ctx context.Context, rs []*driver.Request) ([]driver.Grant, error) {
	spaces, names := make([]driver.Space, len(rs)), make([]string, len(rs))
	limit := 0
	for i, r := range rs {
		spaces[i], names[i] = r.Space, r.Key
		if r.Mode == driver.Limited {
			if limit != 0 && r.Limit != limit {
				return nil, driver.ErrSkip
			}
			limit = r.Limit
		}
	}
	if !d.sameSlot(spaces, names) {
		return nil, driver.ErrSkip
	}
	if err := d.raiseFor(ctx, rs...); err != nil {
		return nil, err
	}
	ttl := max(rs[0].TTL.Milliseconds(), 1)
	keys := []string{d.fenceKey(rs[0].Space, rs[0].Key)}
	args := []any{rs[0].Owner, ttl, limit}
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
	case -2:
		return nil, limitMismatch(rs[res[1]-1], res[2], res[3])
	case 0:
		gs[res[1]-1].Retry = time.Duration(res[2]) * time.Millisecond
		return gs, nil
	}
	for i, r := range rs {
		gs[i] = driver.Grant{Fence: uint64(res[i+1]), Hold: d.hold(r, calls[i], ttl), Validity: validity(r, ttl)}
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
	keys := make([]string, 0, 4*len(hs))
	args := []any{""} // the wake, below
	spaces, names := make([]driver.Space, len(hs)), make([]string, len(hs))
	for i, dh := range hs {
		h, ok := dh.(*hold)
		if !ok || h.d != d {
			return nil, driver.ErrSkip
		}
		keys = append(keys, d.keys(h.space, h.key)...)
		args = append(args, h.owner, int(h.mode), h.id)
		spaces[i], names[i] = h.space, h.key
	}
	if !d.sameSlot(spaces, names) {
		return nil, driver.ErrSkip
	}
	args[0] = d.wake(spaces[0], names[0]) // every hold's, since they share a slot
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

var (
	_ driver.BatchRefresher = (*redisDriver)(nil)
	_ driver.Sharder        = (*redisDriver)(nil)
)

// Shard is the master of h's lock on a slotted cluster (its address), so
// that a master that hangs delays its own holds' renewals alone; "" for
// any other hold.
func (d *redisDriver) Shard(dh driver.Hold) string {
	h, ok := dh.(*hold)
	if !ok || h.d != d || !d.slotted() {
		return ""
	}
	m, err := d.client.(*goredis.ClusterClient).MasterForKey(context.Background(), d.lockKey(h.space, h.key))
	if err != nil {
		return ""
	}
	return m.String()
}

// RefreshBatch renews the holds in one script (see refreshBatchScript);
// on a slotted cluster, where one script reaches one lock, in one
// pipeline of scripts (a round trip per master). A hold of another driver
// is declined (driver.ErrSkip).
func (d *redisDriver) RefreshBatch(ctx context.Context, hs []driver.Hold) ([]driver.Refreshed, error) {
	out := make([]driver.Refreshed, len(hs))
	var keys []string
	var args []any
	var mine []int
	for i, dh := range hs {
		h, ok := dh.(*hold)
		if !ok || h.d != d {
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
	res, errs, err := d.refreshAll(ctx, keys, args)
	if err != nil {
		return nil, backendErr(ctx, err)
	}
	for j, i := range mine {
		switch {
		case errs != nil && errs[j] != nil:
			out[i].Err = backendErr(ctx, errs[j]) // its master alone failed
		case res[j] == 0:
			out[i].Err = locker.ErrNotHeld
		default:
			out[i].Valid = time.Duration(hs[i].(*hold).ttl) * time.Millisecond
		}
	}
	return out, nil
}

// refreshAll runs refreshBatchScript over the holds whose keys (lock and
// exp of each) and args (four each) are given: 1 or 0 for each. On a
// slotted cluster it pipelines refreshScript for each to its master
// instead, the masters at once, and a master that fails fails its holds
// alone (errs).
func (d *redisDriver) refreshAll(ctx context.Context, keys []string, args []any) (res []int64, errs []error, err error) {
	if !d.slotted() {
		res, err = refreshBatchScript.Run(ctx, d.client, keys, args...).Int64Slice()
		return res, nil, err
	}
	cc := d.client.(*goredis.ClusterClient)
	n := len(keys) / 2
	res, errs = make([]int64, n), make([]error, n)
	byMaster := map[*goredis.Client][]int{}
	for j := range n {
		m, err := cc.MasterForKey(ctx, keys[2*j])
		if err != nil {
			errs[j] = err
			continue
		}
		byMaster[m] = append(byMaster[m], j)
	}
	var wg sync.WaitGroup
	for m, js := range byMaster {
		wg.Go(func() {
			for j, c := range refreshOn(ctx, m, js, keys, args) {
				res[js[j]], errs[js[j]] = c.Int64()
			}
		})
	}
	wg.Wait()
	return res, errs, nil
}

// refreshOn sends refreshScript by its SHA for the holds js to master m,
// in one pipeline, loading the script first if m has not seen it.
func refreshOn(ctx context.Context, m *goredis.Client, js []int, keys []string, args []any) []*goredis.Cmd {
	send := func() []*goredis.Cmd {
		cmds := make([]*goredis.Cmd, len(js))
		_, _ = m.Pipelined(ctx, func(p goredis.Pipeliner) error { // each command's error is its own
			for i, j := range js {
				cmds[i] = refreshScript.EvalSha(ctx, p, keys[2*j:2*j+2], args[4*j:4*j+4]...)
			}
			return nil
		})
		return cmds
	}
	cmds := send()
	if slices.ContainsFunc(cmds, func(c *goredis.Cmd) bool { return goredis.HasErrorPrefix(c.Err(), "NOSCRIPT") }) {
		if refreshScript.Load(ctx, m).Err() == nil {
			cmds = send()
		}
	}
	return cmds
}
