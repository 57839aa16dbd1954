package etcd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// testLocker is a Locker on the test etcd, closed when t ends, its
// driver, and a direct client to inspect entries.
func testLocker(t *testing.T) (locker.Locker, *etcdDriver, *clientv3.Client) {
	u := testenv.URL(t, "LOCKER_TEST_ETCD")
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{strings.Split(u.Host, ",")[0]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	prefix := u.Path
	if prefix == "" || prefix == "/" {
		prefix = DefaultPrefix
	}
	d, err := newDriver(c, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	l := locker.New(d)
	t.Cleanup(func() { l.Close() })
	return l, d, c
}

// readEntry returns key's only queue entry and its record.
func readEntry(t *testing.T, d *etcdDriver, c *clientv3.Client, key string) (string, int64, record) {
	t.Helper()
	resp, err := c.Get(context.Background(), d.queue(driver.Plain, key), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("%d entries for %q, want 1", len(resp.Kvs), key)
	}
	rec, err := decodeRecord(resp.Kvs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	return string(resp.Kvs[0].Key), resp.Kvs[0].ModRevision, rec
}

// Adding or dropping a hold twice, as a retry after a lost reply does, has
// the effect of doing it once: no hold leaks, and no other lease's hold
// is dropped.
func TestHoldOpsIdempotent(t *testing.T) {
	l, d, c := testLocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := "etcd-internal-" + t.Name() + "-" + time.Now().Format("150405.000000")
	const owner = "idempotent-owner"
	a, err := l.Lock(ctx, key, locker.WithOwner(owner))
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Lock(ctx, key, locker.WithOwner(owner)) // re-entry
	if err != nil {
		t.Fatal(err)
	}
	name, rev, rec := readEntry(t, d, c, key)
	if len(rec.Holds) != 2 {
		t.Fatalf("holds after re-entry = %v, want 2", rec.Holds)
	}
	holds := func() int {
		t.Helper()
		_, _, r := readEntry(t, d, c, key)
		return len(r.Holds)
	}

	// Add: the same call again is refused by its guard; a retry that
	// reads the entry again finds its hold there and writes nothing.
	const extra = "extra-hold"
	if err := d.addHold(ctx, key, name, rev, rec, extra); err != nil {
		t.Fatal(err)
	}
	if err := d.addHold(ctx, key, name, rev, rec, extra); !errors.Is(err, errRequeue) {
		t.Errorf("repeated addHold = %v, want errRequeue", err)
	}
	_, rev2, rec2 := readEntry(t, d, c, key)
	if err := d.addHold(ctx, key, name, rev2, rec2, extra); err != nil {
		t.Errorf("addHold retried after a re-read = %v", err)
	}
	if n := holds(); n != 3 {
		t.Errorf("holds after adding one hold twice = %d, want 3", n)
	}

	// Drop: the second time changes nothing and says so.
	if err := d.dropHold(ctx, key, name, record{Owner: owner}, extra, 0); err != nil {
		t.Fatal(err)
	}
	if err := d.dropHold(ctx, key, name, record{Owner: owner}, extra, 0); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("repeated dropHold = %v, want ErrNotHeld", err)
	}
	if n := holds(); n != 2 {
		t.Errorf("holds after dropping one hold twice = %d, want 2", n)
	}

	// b's Unlock lands but its reply is lost: the user's retried Unlock
	// (a Release after a failed one) reports success and drops nothing.
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	retry := &hold{entry: &entry{d: d, r: &driver.Request{Key: key, Owner: owner, ID: rec.Holds[1], TTL: locker.DefaultTTL}, name: name, lease: &etcdLease{d: d}}, created: int64(b.Fence())}
	retry.unsure = true // as the failed first try left it
	if err := retry.Release(ctx); err != nil {
		t.Errorf("retried Release after a lost reply = %v, want nil", err)
	}
	if n := holds(); n != 1 {
		t.Errorf("holds after b's Unlock and its retry = %d, want 1 (a's)", n)
	}
	if err := a.Refresh(ctx); err != nil {
		t.Errorf("a.Refresh after b's retried Unlock = %v; a's hold was dropped", err)
	}
	// Without an earlier failed try, a missing hold is reported.
	fresh := &hold{entry: &entry{d: d, r: &driver.Request{Key: key, Owner: owner, ID: rec.Holds[1]}, name: name, lease: &etcdLease{d: d}}, created: int64(b.Fence())}
	if err := fresh.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("Release of a hold never dropped by us = %v, want ErrNotHeld", err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Get(ctx, d.queue(driver.Plain, key), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Errorf("entries after the last Unlock: %v, %v; want none", resp.Count, err)
	}
}
