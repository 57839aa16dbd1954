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
	if err := a.set.checkKey(key); err != nil {
		return LockInfo{}, err
	}
	leave, err := a.set.enter()
	if err != nil {
		return LockInfo{}, err
	}
	defer leave()
	ctx, stop := a.set.context(ctx)
	defer stop()
	info, err := a.admin.Status(ctx, key)
	return info, ctxErr(ctx, key, err)
}

func (a *adminLocker) List(ctx context.Context, prefix string) ([]LockInfo, error) {
	if err := a.set.check(); err != nil {
		return nil, err
	}
	leave, err := a.set.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	ctx, stop := a.set.context(ctx)
	defer stop()
	list, err := a.admin.List(ctx, prefix)
	if err != nil {
		return nil, ctxErr(ctx, prefix, err)
	}
	list = slices.DeleteFunc(list, func(i LockInfo) bool { return !strings.HasPrefix(i.Key, prefix) })
	slices.SortFunc(list, func(a, b LockInfo) int { return strings.Compare(a.Key, b.Key) })
	return list, nil
}

func (a *adminLocker) ForceUnlock(ctx context.Context, key string) error {
	if err := a.set.checkKey(key); err != nil {
		return err
	}
	leave, err := a.set.enter()
	if err != nil {
		return err
	}
	defer leave()
	ctx, stop := a.set.context(ctx)
	defer stop()
	return ctxErr(ctx, key, a.admin.ForceUnlock(ctx, key))
}
