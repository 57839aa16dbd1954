package sql

import (
	"sync"

	"github.com/locker-go/locker"
)

// drivers maps each Locker this package made to its driver.
var drivers sync.Map

func init() { opened = func(l locker.Locker, d *sqlDriver) { drivers.Store(l, d) } }

// driverOf is the driver under l, a Locker this package made.
func driverOf(l locker.Locker) *sqlDriver {
	d, _ := drivers.Load(l)
	return d.(*sqlDriver)
}

// Crash makes l vanish without unlocking, as a killed process would.
func Crash(l locker.Locker) { driverOf(l).crash() }
