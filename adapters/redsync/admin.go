package redsync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/rediskey"
)

// adminTimeout bounds each master's part of an operator's call: longer
// than the node timeout, as a SCAN may take a while, yet bounded.
const adminTimeout = 5 * time.Second

// Status returns the owner that holds key on a quorum of masters, or
// ErrNotHeld.
func (d *redlock) Status(ctx context.Context, _ driver.Space, key string) (locker.LockInfo, error) {
	now := time.Now()
	res := each(ctx, d, adminTimeout, func(ctx context.Context, _ int, c goredis.UniversalClient) (*locker.LockInfo, error) {
		v, err := statusScript.Run(ctx, c, []string{d.lockKey(key)}).Slice()
		if err != nil || len(v) < 4 {
			return nil, err
		}
		owner, _ := v[0].(string) // comma-ok: a foreign record must not panic
		h, _ := v[1].(string)
		f, _ := v[2].(string)
		pttl, _ := v[3].(int64)
		info := &locker.LockInfo{Key: key, Owner: owner, Expires: now.Add(time.Duration(pttl) * time.Millisecond)}
		info.Holds, _ = strconv.Atoi(h)
		info.Fence, _ = strconv.ParseUint(f, 10, 64)
		return info, nil
	})
	byOwner := map[string][]*locker.LockInfo{}
	for _, r := range res {
		if r.v != nil {
			byOwner[r.v.Owner] = append(byOwner[r.v.Owner], r.v)
		}
	}
	for _, recs := range byOwner {
		if len(recs) >= d.quorum {
			return merge(recs, d.quorum), nil
		}
	}
	if errs := nodeErrs(res); len(res)-len(errs) < d.quorum {
		return locker.LockInfo{}, locker.Unavailable(errors.Join(errs...))
	}
	return locker.LockInfo{}, fmt.Errorf("%w: %q", locker.ErrNotHeld, key)
}

// merge is the lock that recs, a quorum or more of one owner's records,
// make: the largest fence and hold count, and it lapses when fewer than a
// quorum of the records remain.
func merge(recs []*locker.LockInfo, quorum int) locker.LockInfo {
	slices.SortFunc(recs, func(a, b *locker.LockInfo) int { return a.Expires.Compare(b.Expires) })
	info := *recs[len(recs)-quorum]
	for _, r := range recs {
		info.Fence, info.Holds = max(info.Fence, r.Fence), max(info.Holds, r.Holds)
	}
	return info
}

// List returns the locks held on a quorum whose keys begin with prefix.
func (d *redlock) List(ctx context.Context, prefix string) ([]locker.LockInfo, error) {
	match := rediskey.MatchPrefix(d.lockKey(prefix))
	res := each(ctx, d, adminTimeout, func(ctx context.Context, _ int, c goredis.UniversalClient) ([]string, error) {
		return rediskey.Scan(ctx, c, match)
	})
	if errs := nodeErrs(res); len(res)-len(errs) < d.quorum {
		return nil, locker.Unavailable(errors.Join(errs...))
	}
	seen := map[string]bool{}
	for _, r := range res {
		for _, k := range r.v {
			seen[strings.TrimPrefix(k, d.lockKey(""))] = true
		}
	}
	var list []locker.LockInfo
	for k := range seen {
		if locker.ValidateKey(k) != nil {
			continue // no Locker could have taken it
		}
		info, err := d.Status(ctx, driver.Plain, k)
		switch {
		case err == nil:
			list = append(list, info)
		case !errors.Is(err, locker.ErrNotHeld):
			return nil, err
		}
	}
	return list, nil
}

// ForceUnlock deletes key's record on every master and publishes the
// release. The holder's next keep-alive finds its records gone on a quorum
// and reports the lease lost.
func (d *redlock) ForceUnlock(ctx context.Context, _ driver.Space, key string) error {
	res := each(ctx, d, adminTimeout, func(ctx context.Context, _ int, c goredis.UniversalClient) ([]int64, error) {
		return forceScript.Run(ctx, c, []string{d.lockKey(key)}, d.channel(key)).Int64Slice()
	})
	for _, r := range res {
		if r.err == nil && len(r.v) > 0 && r.v[0] == 1 {
			return nil
		}
	}
	if errs := nodeErrs(res); len(errs) > len(d.masters)-d.quorum {
		return locker.Unavailable(errors.Join(errs...))
	}
	return fmt.Errorf("%w: %q", locker.ErrNotHeld, key)
}
