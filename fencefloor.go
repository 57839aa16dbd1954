package locker

import (
	"context"
	"errors"
	"fmt"

	"github.com/locker-go/locker/driver"
)

// FenceRaiser is implemented by Lockers that can keep a key's fences above
// a floor (driver.FenceFloorer): every Locker of this module's adapters,
// and Migration over two of them. A Locker that implements it may still
// answer errors.ErrUnsupported, when its backend cannot. Wrappers of a
// Locker implement it by passing the call on, so as not to hide it.
type FenceRaiser interface {
	// RaiseFence makes every later grant of key to a new owner carry a
	// fence above floor; live leases keep theirs. opts name the key's
	// namespace (Subtree); other options are ignored. A floor of 0 only
	// checks that the Locker can.
	RaiseFence(ctx context.Context, key string, floor uint64, opts ...Option) error
}

// RaiseFence raises key's fences above floor through the driver, or
// answers errors.ErrUnsupported if the driver cannot.
func (p *portable) RaiseFence(ctx context.Context, key string, floor uint64, opts ...Option) error {
	ctx, o, end, err := p.set.begin(ctx, key, opts)
	if err != nil {
		return err
	}
	defer end()
	switch {
	case p.floorer == nil:
		return p.unsupported()
	case floor == 0: // nothing to raise: a check of the capability
		return nil
	}
	space := driver.Plain
	if o.Subtree {
		space = driver.Subtree
	}
	return p.floorer.RaiseFence(ctx, space, key, floor)
}

// floors checks that the driver can honour o's fence floor, if any.
func (p *portable) floors(o Options) error {
	if o.FenceFloor == 0 || p.floorer != nil {
		return nil
	}
	return p.unsupported()
}

func (p *portable) unsupported() error {
	return fmt.Errorf("locker: fence floors: %T: %w", p.d, errors.ErrUnsupported)
}
