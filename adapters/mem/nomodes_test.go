package mem

import (
	"context"
	"errors"
	"testing"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance"
	"github.com/locker-go/locker/driver"
)

// oldDriver is a driver written before modes: it knows nothing of
// Request.Mode and Request.Space, nor of batches, as a third party's may.
type oldDriver struct{ d *memDriver }

func (o oldDriver) strip(r *driver.Request) *driver.Request {
	c := *r
	c.Mode, c.Space = driver.Exclusive, driver.Plain
	return &c
}

func (o oldDriver) Acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	return o.d.Acquire(ctx, o.strip(r))
}
func (o oldDriver) Abandon(ctx context.Context, r *driver.Request) { o.d.Abandon(ctx, o.strip(r)) }
func (o oldDriver) Close(ctx context.Context) error                { return o.d.Close(ctx) }
func (o oldDriver) Subscribe(ctx context.Context, r *driver.Request) (<-chan struct{}, func(), error) {
	return o.d.Subscribe(ctx, o.strip(r))
}
func (o oldDriver) Listening() bool { return true }

// A driver that ignores modes locks more, never less: shared leases are
// exclusive, a subtree lock takes its whole top-level tree (and meets the
// plain key of that name), and every exclusion check still passes.
func TestConformanceWithoutModes(t *testing.T) {
	name := t.Name()
	conformance.Run(t, conformance.Harness{
		NewLocker: func(context.Context) (locker.Locker, error) {
			return locker.New(oldDriver{newDriver(name)}), nil
		},
		NoModes: true,
	})
}

func TestWithoutModesLocksMore(t *testing.T) {
	ctx := context.Background()
	a, b := locker.New(oldDriver{newDriver(t.Name())}), locker.New(oldDriver{newDriver(t.Name())})
	defer a.Close()
	defer b.Close()
	held, err := a.TryLock(ctx, "r", locker.Shared())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx, "r", locker.Shared()); !errors.Is(err, locker.ErrLocked) {
		t.Errorf("second shared lease on a driver without modes = %v, want ErrLocked", err)
	}
	_ = held.Unlock(ctx)
	tree, err := a.TryLock(ctx, "t/a/b", locker.Subtree())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"t/c", "t"} {
		if _, err := b.TryLock(ctx, p, locker.Subtree()); !errors.Is(err, locker.ErrLocked) {
			t.Errorf("subtree %q beside t/a/b on a driver without modes = %v, want ErrLocked", p, err)
		}
	}
	if _, err := b.TryLock(ctx, "u", locker.Subtree()); err != nil {
		t.Errorf("subtree u beside t/a/b = %v, want it granted (another tree)", err)
	}
	_ = tree.Unlock(ctx)
}
