package sql

import (
	"context"
	"crypto/rand"
	"net/url"
	"strings"
	"sync"

	"gorm.io/gorm"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/perproc"
)

// drivers maps each Locker Open made to its driver.
var drivers sync.Map

// Open is locker.Open for this package's URLs, keeping the Locker's driver
// for Crash and for tests that reach into it. Its Lockers do not share
// their database handle (as locker.Open's do), so that Crash ends only
// its Locker's connections, as a killed process would.
func Open(ctx context.Context, raw string) (locker.Locker, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	d, err := openIn(ctx, u, new(perproc.Map[string, *gorm.DB])) // a pool of its own: see Crash
	if err != nil {
		return nil, err
	}
	l := locker.New(d)
	drivers.Store(l, d)
	return l, nil
}

// driverOf is the driver under l, a Locker Open made.
func driverOf(l locker.Locker) *sqlDriver {
	d, _ := drivers.Load(l)
	return d.(*sqlDriver)
}

// Crash makes l, a Locker Open made, vanish as a killed process would: its
// connections close without unlocking, so its leases' keep-alives fail and
// their rows lapse by their TTL.
func Crash(l locker.Locker) {
	d := driverOf(l)
	d.stop()
	_ = d.db.Close()
}

// WithApp is u with an application_name of its own, returned too, so
// that a test can cut the connections of one Locker alone.
func WithApp(u *url.URL, prefix string) (string, string) {
	app := prefix + strings.ToLower(rand.Text()[:8])
	q := u.Query()
	q.Set("application_name", app)
	au := *u
	au.RawQuery = q.Encode()
	return au.String(), app
}
