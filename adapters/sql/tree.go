package sql

import (
	"context"

	"github.com/locker-go/locker/driver"
)

// treeDriver returns the driver of the Subtree space, opening it on first
// use: its tables, beside the plain keys' own, are named "<table>_tree",
// so that a subtree path and the plain key of the same name are two
// locks, and its fence counter is shared by the whole tree.
func (d *sqlDriver) treeDriver(ctx context.Context) (*sqlDriver, error) {
	if d.openTree == nil {
		return d, nil // d is a tree driver
	}
	d.treeMu.Lock()
	defer d.treeMu.Unlock()
	if d.tree == nil {
		t, err := d.openTree(ctx)
		if err != nil {
			return nil, err
		}
		d.tree = t
	}
	return d.tree, nil
}

// spaceDriver is d for the Plain space, its tree driver for Subtree.
func (d *sqlDriver) spaceDriver(ctx context.Context, space driver.Space) (*sqlDriver, error) {
	if space == driver.Subtree {
		return d.treeDriver(ctx)
	}
	return d, nil
}
