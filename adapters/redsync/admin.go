package redsync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-redsync/redsync/v4"
	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/rediskey"
)

// adminTimeout bounds each master's part of an operator's call: longer
// than the node timeout, as a SCAN may take a while, yet bounded.
const adminTimeout = 5 * time.Second

// record is one master's lock record.
type record struct {
	owner        string
	holds, fence int64
	pttl         time.Duration
}

// Status returns the owner that holds key on a quorum of masters, or
// ErrNotHeld.
func (l *Locker) Status(ctx context.Context, key string) (locker.LockInfo, error) {
	if err := l.set.CheckKey(key); err != nil {
		return locker.LockInfo{}, err
	}
	now := time.Now()
	res := each(ctx, l, adminTimeout, func(ctx context.Context, _ int, c goredis.UniversalClient) (*record, error) {
		v, err := statusScript.Run(ctx, c, []string{l.lockKey(key)}).Slice()
		if err != nil || len(v) < 4 {
			return nil, err
		}
		owner, ok := v[0].(string)
		if !ok {
			return nil, fmt.Errorf("unexpected record %v", v)
		}
		h, _ := v[1].(string)
		f, _ := v[2].(string)
		p, _ := v[3].(int64)
		r := &record{owner: owner, pttl: time.Duration(p) * time.Millisecond}
		r.holds, _ = strconv.ParseInt(h, 10, 64)
		r.fence, _ = strconv.ParseInt(f, 10, 64)
		return r, nil
	})
	byOwner := map[string][]*record{}
	answered := 0
	var errs []error
	for i, r := range res {
		if r.err != nil {
			errs = append(errs, &redsync.RedisError{Node: i, Err: r.err})
			continue
		}
		answered++
		if r.v != nil {
			byOwner[r.v.owner] = append(byOwner[r.v.owner], r.v)
		}
	}
	for owner, recs := range byOwner {
		if len(recs) < l.quorum {
			continue
		}
		info := locker.LockInfo{Key: key, Owner: owner}
		var ttls []time.Duration
		for _, r := range recs {
			info.Fence = max(info.Fence, uint64(r.fence))
			info.Holds = max(info.Holds, int(r.holds))
			ttls = append(ttls, r.pttl)
		}
		// The lock lapses when fewer than a quorum of records remain.
		slices.Sort(ttls)
		info.Expires = now.Add(ttls[len(ttls)-l.quorum])
		return info, nil
	}
	if answered < l.quorum {
		return locker.LockInfo{}, locker.Unavailable(errors.Join(errs...))
	}
	return locker.LockInfo{}, fmt.Errorf("%w: %q", locker.ErrNotHeld, key)
}

// List returns the locks held on a quorum whose keys begin with prefix.
func (l *Locker) List(ctx context.Context, prefix string) ([]locker.LockInfo, error) {
	if err := l.set.Check(); err != nil {
		return nil, err
	}
	match := rediskey.MatchPrefix(l.lockKey(prefix))
	res := each(ctx, l, adminTimeout, func(ctx context.Context, _ int, c goredis.UniversalClient) ([]string, error) {
		return rediskey.Scan(ctx, c, match)
	})
	seen := map[string]bool{}
	var errs []error
	for i, r := range res {
		if r.err != nil {
			errs = append(errs, &redsync.RedisError{Node: i, Err: r.err})
			continue
		}
		for _, k := range r.v {
			seen[strings.TrimPrefix(k, l.lockKey(""))] = true
		}
	}
	if len(res)-len(errs) < l.quorum {
		return nil, locker.Unavailable(errors.Join(errs...))
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var list []locker.LockInfo
	for _, k := range keys {
		info, err := l.Status(ctx, k)
		switch {
		case err == nil:
			list = append(list, info)
		case !errors.Is(err, locker.ErrNotHeld) && !errors.Is(err, locker.ErrInvalidKey):
			return nil, err
		}
	}
	return list, nil
}

// ForceUnlock deletes key's record on every master and publishes the
// release. The holder's next keep-alive finds its records gone on a quorum
// and reports the lease lost.
func (l *Locker) ForceUnlock(ctx context.Context, key string) error {
	if err := l.set.CheckKey(key); err != nil {
		return err
	}
	res := each(ctx, l, adminTimeout, func(ctx context.Context, _ int, c goredis.UniversalClient) ([]int64, error) {
		return forceScript.Run(ctx, c, []string{l.lockKey(key)}, l.channel(key)).Int64Slice()
	})
	t := count(res)
	if t.n[1] > 0 {
		return nil
	}
	if len(t.errs) > len(l.masters)-l.quorum {
		return locker.Unavailable(errors.Join(t.errs...))
	}
	return fmt.Errorf("%w: %q", locker.ErrNotHeld, key)
}
