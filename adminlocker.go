package locker

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/locker-go/locker/driver"
)

// adminLocker is the portable Locker over a driver that implements
// driver.Admin: it is also a locker.Admin. Its calls, like Lock's, run
// under a context that Close cancels.
type adminLocker struct {
	*portable
	admin driver.Admin
}

func (a *adminLocker) Status(ctx context.Context, key string, opts ...Option) (LockInfo, error) {
	ctx, end, err := a.set.enter(ctx)
	if err != nil {
		return LockInfo{}, err
	}
	defer end()
	space, node, err := a.space(key, opts)
	if err != nil {
		return LockInfo{}, err
	}
	info, err := a.admin.Status(ctx, space, node)
	if err != nil {
		return info, ctxErr(ctx, key, err)
	}
	return a.complete(info), nil
}

func (a *adminLocker) List(ctx context.Context, prefix string) ([]LockInfo, error) {
	ctx, end, err := a.set.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	list, err := a.admin.List(ctx, prefix)
	if err != nil {
		return nil, ctxErr(ctx, prefix, err)
	}
	for i := range list {
		list[i] = a.complete(list[i])
	}
	list = slices.DeleteFunc(list, func(i LockInfo) bool { return !strings.HasPrefix(i.Key, prefix) })
	slices.SortFunc(list, func(a, b LockInfo) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return int(a.Space) - int(b.Space)
	})
	return list, nil
}

func (a *adminLocker) ForceUnlock(ctx context.Context, key string, opts ...Option) error {
	ctx, end, err := a.set.enter(ctx)
	if err != nil {
		return err
	}
	defer end()
	space, node, err := a.space(key, opts)
	if err != nil {
		return err
	}
	return ctxErr(ctx, key, a.admin.ForceUnlock(ctx, space, node))
}

// space validates key and says where the driver keeps what opts name:
// with Subtree() a subtree lock's path, with Campaign's option (Observe's
// Status) an election's node (node), else a plain key. A driver without modes keeps
// one space.
func (a *adminLocker) space(key string, opts []Option) (driver.Space, string, error) {
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	if err := validate(key, o.Subtree); err != nil {
		return driver.Plain, "", err
	}
	if err := checkElection(key, o); err != nil {
		return driver.Plain, "", err
	}
	if o.Subtree && a.modes {
		return driver.Subtree, key, nil
	}
	space, node := a.node(key, o)
	return space, node, nil
}

// complete fills in Holders for an exclusive lock, and the hold counts
// this Locker keeps for its driver (driver.Reenterer).
func (a *adminLocker) complete(info LockInfo) LockInfo {
	if len(info.Holders) == 0 {
		info.Holders = []driver.Holder{{Owner: info.Owner, Fence: info.Fence, Holds: info.Holds, Expires: info.Expires}}
	}
	info.Holders = slices.Clone(info.Holders)
	for i, h := range info.Holders {
		info.Holders[i].Holds = a.reentries.holds(LockInfo{Key: info.Key, Space: info.Space, Owner: h.Owner, Fence: h.Fence, Holds: h.Holds})
		info.Holders[i].Owner, info.Holders[i].Label = splitOwner(h.Owner) // the backend's owner token (see WithLabel)
	}
	slices.SortFunc(info.Holders, func(a, b driver.Holder) int { return cmp.Compare(a.Fence, b.Fence) })
	first := info.Holders[0]
	info.Owner, info.Label, info.Fence, info.Holds, info.Expires = first.Owner, first.Label, first.Fence, first.Holds, first.Expires
	if a.modes {
		info = elected(info)
	}
	return info
}
