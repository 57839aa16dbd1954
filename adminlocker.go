package locker

import (
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

func (a *adminLocker) Status(ctx context.Context, key string) (LockInfo, error) {
	ctx, end, err := a.set.enter(ctx)
	if err != nil {
		return LockInfo{}, err
	}
	defer end()
	if err := ValidateKey(key); err != nil {
		return LockInfo{}, err
	}
	info, err := a.admin.Status(ctx, key)
	if err != nil {
		return info, ctxErr(ctx, key, err)
	}
	info.Holds = a.shares.holds(info)
	return info, nil
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
		list[i].Holds = a.shares.holds(list[i])
	}
	list = slices.DeleteFunc(list, func(i LockInfo) bool { return !strings.HasPrefix(i.Key, prefix) })
	slices.SortFunc(list, func(a, b LockInfo) int { return strings.Compare(a.Key, b.Key) })
	return list, nil
}

func (a *adminLocker) ForceUnlock(ctx context.Context, key string) error {
	ctx, end, err := a.set.enter(ctx)
	if err != nil {
		return err
	}
	defer end()
	if err := ValidateKey(key); err != nil {
		return err
	}
	return ctxErr(ctx, key, a.admin.ForceUnlock(ctx, key))
}
