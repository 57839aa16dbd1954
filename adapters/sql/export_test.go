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

// Crash makes l vanish as a killed process would: its connections close
// without unlocking, so its leases' keep-alives fail and their rows lapse
// by their TTL.
func Crash(l locker.Locker) {
	d := driverOf(l)
	d.stop()
	_ = d.db.Close()
}
