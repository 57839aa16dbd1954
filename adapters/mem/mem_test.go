package mem

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance"
	"github.com/locker-go/locker/driver"
)

// crashable is a mem driver that can be made to vanish as a killed process
// would: every backend call fails from then on, so its leases are neither
// renewed nor released and lapse at their TTL.
type crashable struct {
	*memDriver
	dead atomic.Bool
}

var errCrashed = locker.Unavailable(errors.New("crashed"))

func (c *crashable) Acquire(ctx context.Context, r *driver.Request) (driver.Grant, error) {
	if c.dead.Load() {
		return driver.Grant{}, errCrashed
	}
	g, err := c.memDriver.Acquire(ctx, r)
	if g.Hold != nil {
		g.Hold = crashHold{g.Hold, &c.dead}
	}
	return g, err
}

type crashHold struct {
	driver.Hold
	dead *atomic.Bool
}

func (h crashHold) Refresh(ctx context.Context) (time.Duration, error) {
	if h.dead.Load() {
		return 0, errCrashed
	}
	return h.Hold.Refresh(ctx)
}

func (h crashHold) Release(ctx context.Context) error {
	if h.dead.Load() {
		return errCrashed
	}
	return h.Hold.Release(ctx)
}

func harness(t testing.TB) conformance.Harness {
	name := t.Name()
	var drivers sync.Map // locker.Locker -> *crashable
	return conformance.Harness{
		NewLocker: func(context.Context) (locker.Locker, error) {
			d := &crashable{memDriver: newDriver(name)}
			l := locker.New(d)
			drivers.Store(l, d)
			return l, nil
		},
		Crash: func(_ context.Context, l locker.Locker) error {
			d, _ := drivers.Load(l)
			d.(*crashable).dead.Store(true)
			return nil
		},
		Count: func(_ context.Context, prefix string) (int, error) {
			return spaceNamed(name).count(prefix), nil
		},
		FIFO: true,
	}
}

func TestConformance(t *testing.T) { conformance.Run(t, harness(t)) }

func BenchmarkConformance(b *testing.B) { conformance.Bench(b, harness(b)) }
