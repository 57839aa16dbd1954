package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// WithLogger reaches the driver: the Locker's etcd lease revoked behind
// its back is logged (Warn) with its id when the keep-alive finds it gone,
// and the leases on it end lost.
func TestLogsLeaseGone(t *testing.T) {
	t.Parallel()
	counted, _, c := countedDriver(t)
	lg, logs := testenv.NewLogs()
	d, err := newDriver(c, WithPrefix(counted.prefix), WithLogger(lg))
	if err != nil {
		t.Fatal(err)
	}
	l := d.locker()
	defer l.Close()
	ctx := context.Background()
	lease, err := l.TryLock(ctx, "k", locker.WithTTL(renewTTL))
	if err != nil {
		t.Fatal(err)
	}
	d.granting <- struct{}{}
	e := d.shared[renewTTL]
	<-d.granting
	if e == nil {
		t.Fatal("no shared etcd lease of the TTL")
	}
	if _, err := c.Revoke(ctx, e.id); err != nil {
		t.Fatal(err)
	}
	r := logs.Wait(t, 3*renewTTL, slog.LevelWarn, "expired or was revoked")
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "lease" && a.Value.String() != fmt.Sprintf("%x", int64(e.id)) {
			t.Errorf("logged lease %s, want %x", a.Value, int64(e.id))
		}
		return true
	})
	<-lease.Done()
	if !errors.Is(lease.Err(), locker.ErrLeaseLost) {
		t.Errorf("Err = %v, want ErrLeaseLost", lease.Err())
	}
}
