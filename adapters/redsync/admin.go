package redsync

import (
	"cmp"
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
	"github.com/locker-go/locker/internal/backoff"
	"github.com/locker-go/locker/internal/rediskey"
)

// adminTimeout bounds each master's part of an operator's call: longer
// than the node timeout, as a SCAN may take a while, yet bounded.
const adminTimeout = 5 * time.Second

// adminKeys are the Redis keys the admin scripts take for n.
func (d *redlock) adminKeys(n name) []string {
	return []string{d.anchor(n), d.holders(n, driver.Shared), d.markExpiries(n), d.holders(n, driver.Limited)}
}

// masterStatus is one master's record of a key: its S, X and L holders,
// how many waiting marks are live, and the L holders' Limit.
type masterStatus struct {
	holders []holderRecord
	marks   int
	limit   int
}

type holderRecord struct {
	mode driver.Mode
	driver.Holder
}

// Status returns the S, X or L holders of key in space that hold it on a
// quorum of masters, or ErrNotHeld. A holder with a record above the
// fence its quorum shows may be a grant whose fence is being claimed
// (votes.fence: until the claim lands, a quorum shows lower counts, and
// the grant's fence is the largest), or one whose late masters counted
// past it and have yet to learn it: the masters are read again, a few
// times, settleWait apart, until they agree (an observer that took the
// lower count would name the new leader by a term it never had).
func (d *redlock) Status(ctx context.Context, space driver.Space, key string) (locker.LockInfo, error) {
	n := name{space, key}
	read := func() []result[*masterStatus] {
		now := time.Now()
		return each(ctx, d, adminTimeout, func(ctx context.Context, _ int, c goredis.UniversalClient) (*masterStatus, error) {
			v, err := statusScript.Run(ctx, c, d.adminKeys(n)).Slice()
			if err != nil {
				return nil, err
			}
			return parseStatus(v, now), nil
		})
	}
	res := read()
	info, held, settling := d.merge(n, res)
	for tries := 0; settling && tries < settleReads; tries++ {
		if err := d.settlePause(ctx); err != nil {
			return locker.LockInfo{}, fmt.Errorf("locker/redlock: status of %q: %w", key, err)
		}
		res = read()
		info, held, settling = d.merge(n, res)
	}
	if held {
		return info, nil
	}
	if errs := nodeErrs(res); len(res)-len(errs) < d.quorum {
		return locker.LockInfo{}, locker.Unavailable(errors.Join(errs...))
	}
	return locker.LockInfo{}, fmt.Errorf("%w: %q", locker.ErrNotHeld, key)
}

// parseStatus reads statusScript's reply; comma-ok throughout, so that a
// foreign record cannot panic.
func parseStatus(v []any, now time.Time) *masterStatus {
	st := &masterStatus{}
	if len(v) < 2 {
		return st
	}
	str := func(x any) string { s, _ := x.(string); return s }
	num := func(x any) int64 {
		if i, ok := x.(int64); ok {
			return i
		}
		i, _ := strconv.ParseInt(str(x), 10, 64)
		return i
	}
	rec := func(mode driver.Mode, f []any) holderRecord {
		fence, _ := strconv.ParseUint(str(f[2]), 10, 64)
		return holderRecord{mode, driver.Holder{Owner: str(f[0]), Holds: int(num(f[1])), Fence: fence,
			Expires: now.Add(time.Duration(num(f[3])) * time.Millisecond)}}
	}
	if str(v[0]) == "legacy" && len(v) >= 5 {
		st.holders = append(st.holders, rec(driver.Exclusive, v[1:5]))
		return st
	}
	st.marks = int(num(v[1]))
	if len(v) < 3 {
		return st
	}
	st.limit = int(num(v[2]))
	for f := v[3:]; len(f) >= 5; f = f[5:] {
		st.holders = append(st.holders, rec(driver.Mode(num(f[0])), f[1:5]))
	}
	return st
}

// settleReads and settleWait bound Status's reads again while a holder's
// fence is settling: a claim lands within a round trip or two.
const (
	settleReads = 3
	settleWait  = 5 * time.Millisecond
)

// pauseFor is a pause of d, or until ctx ends (its error).
func pauseFor(d time.Duration) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if !backoff.Sleep(ctx, d) {
			return ctx.Err()
		}
		return nil
	}
}

// merge is the lock that the masters' records make: the holders recorded
// on a quorum (Exclusive if one of them is, else Limited if one is, with
// the Limit most masters report), each with the largest fence and hold
// count, lapsing when fewer than a quorum of its records remain; and the
// waiting marks a quorum has. settling: a holder has a record above the
// fence merged (see Status).
func (d *redlock) merge(n name, res []result[*masterStatus]) (info locker.LockInfo, held, settling bool) {
	type who struct {
		mode  driver.Mode
		owner string
	}
	recs := map[who][]driver.Holder{}
	var marks []int
	limits := map[int]int{}
	for _, r := range res {
		if r.v == nil {
			continue
		}
		marks = append(marks, r.v.marks)
		if r.v.limit > 0 {
			limits[r.v.limit]++
		}
		for _, h := range r.v.holders {
			recs[who{h.mode, h.Owner}] = append(recs[who{h.mode, h.Owner}], h.Holder)
		}
	}
	info = locker.LockInfo{Key: n.key, Space: n.space, Mode: driver.Shared}
	for w, hs := range recs {
		if len(hs) < d.quorum {
			continue
		}
		h := mergeHolder(hs, d.quorum)
		settling = settling || slices.ContainsFunc(hs, func(r driver.Holder) bool { return r.Fence > h.Fence })
		if outranks(w.mode, info.Mode) {
			info.Mode, info.Holders = w.mode, nil
		}
		if w.mode == info.Mode {
			info.Holders = append(info.Holders, h)
		}
	}
	if len(info.Holders) == 0 {
		return info, false, settling
	}
	if info.Mode == driver.Limited {
		info.Limit = mostReported(limits)
	}
	slices.SortFunc(info.Holders, func(a, b driver.Holder) int { return cmp.Compare(a.Fence, b.Fence) })
	first := info.Holders[0]
	info.Owner, info.Fence, info.Holds, info.Expires = first.Owner, first.Fence, first.Holds, first.Expires
	if len(marks) >= d.quorum {
		slices.Sort(marks)
		info.Waiters = marks[len(marks)-d.quorum]
	}
	return info, true, settling
}

// outranks reports whether holders in mode m name a key's mode over those
// in mode o, where (but for a moment) they cannot meet: X, then L, then S.
func outranks(m, o driver.Mode) bool {
	rank := func(m driver.Mode) int {
		switch m {
		case driver.Exclusive:
			return 2
		case driver.Limited:
			return 1
		}
		return 0
	}
	return rank(m) > rank(o)
}

// mostReported is the Limit the most masters report (the larger of a tie).
func mostReported(limits map[int]int) int {
	best := 0
	for l, c := range limits {
		if c > limits[best] || c == limits[best] && l > best {
			best = l
		}
	}
	return best
}

// mergeHolder is one holder as recs, a quorum or more of its records,
// make: its holds the most recorded, its fence the largest recorded on a
// quorum of them, else the largest of all. A grant's fence is recorded
// on a quorum (lower counts elsewhere learn it in the background), but a
// master that granted after a quorum decided (see taken) may have
// counted past it until it learns it too.
func mergeHolder(recs []driver.Holder, quorum int) driver.Holder {
	slices.SortFunc(recs, func(a, b driver.Holder) int { return a.Expires.Compare(b.Expires) })
	h := recs[len(recs)-quorum]
	h.Fence = quorumFence(recs, quorum)
	for _, r := range recs {
		h.Holds = max(h.Holds, r.Holds)
	}
	return h
}

// quorumFence is the largest fence recorded on quorum of recs, else the
// largest recorded.
func quorumFence(recs []driver.Holder, quorum int) uint64 {
	count, most, onQuorum := map[uint64]int{}, uint64(0), uint64(0)
	for _, r := range recs {
		count[r.Fence]++
		most = max(most, r.Fence)
		if count[r.Fence] >= quorum {
			onQuorum = max(onQuorum, r.Fence)
		}
	}
	if onQuorum > 0 {
		return onQuorum
	}
	return most
}

// List returns the locks held on a quorum whose keys begin with prefix,
// in both spaces.
func (d *redlock) List(ctx context.Context, prefix string) ([]locker.LockInfo, error) {
	spaces := []driver.Space{driver.Plain, driver.Subtree}
	res := each(ctx, d, adminTimeout, func(ctx context.Context, _ int, c goredis.UniversalClient) ([]name, error) {
		var names []name
		for _, s := range spaces {
			head := d.anchor(name{s, ""})
			keys, err := rediskey.Scan(ctx, c, rediskey.MatchPrefix(d.anchor(name{s, prefix})))
			if err != nil {
				return nil, err
			}
			for _, k := range keys {
				names = append(names, name{s, strings.TrimPrefix(k, head)})
			}
		}
		return names, nil
	})
	if errs := nodeErrs(res); len(res)-len(errs) < d.quorum {
		return nil, locker.Unavailable(errors.Join(errs...))
	}
	seen := map[name]bool{}
	var list []locker.LockInfo
	for _, r := range res {
		for _, n := range r.v {
			if seen[n] || locker.ValidateKey(n.key) != nil { // no Locker could have taken it
				continue
			}
			seen[n] = true
			info, err := d.Status(ctx, n.space, n.key)
			switch {
			case err == nil:
				list = append(list, info)
			case !errors.Is(err, locker.ErrNotHeld):
				return nil, err
			}
		}
	}
	return list, nil
}

// ForceUnlock deletes key's S, X and L holders in space on every master and
// publishes the release. The holders' next keep-alive finds their records
// gone on a quorum and reports the lease lost.
func (d *redlock) ForceUnlock(ctx context.Context, space driver.Space, key string) error {
	n := name{space, key}
	res := each(ctx, d, adminTimeout, func(ctx context.Context, _ int, c goredis.UniversalClient) ([]int64, error) {
		return forceScript.Run(ctx, c, d.adminKeys(n), d.channel(n)).Int64Slice()
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
