package mem

import (
	"context"
	"strings"
	"time"

	"github.com/locker-go/locker"
)

func info(key string, e *entry) locker.LockInfo {
	return locker.LockInfo{Key: key, Owner: e.owner, Fence: e.fence, Holds: len(e.holds), Expires: e.expires}
}

func (d *memDriver) Status(_ context.Context, key string) (locker.LockInfo, error) {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	e := d.s.live(key, time.Now())
	if e == nil {
		return locker.LockInfo{}, locker.ErrNotHeld
	}
	return info(key, e), nil
}

func (d *memDriver) List(_ context.Context, prefix string) ([]locker.LockInfo, error) {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	var list []locker.LockInfo
	now := time.Now()
	for key := range d.s.locks {
		if e := d.s.live(key, now); e != nil && strings.HasPrefix(key, prefix) {
			list = append(list, info(key, e))
		}
	}
	return list, nil
}

func (d *memDriver) ForceUnlock(_ context.Context, key string) error {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if d.s.live(key, time.Now()) == nil {
		return locker.ErrNotHeld
	}
	d.s.free(key)
	return nil
}
