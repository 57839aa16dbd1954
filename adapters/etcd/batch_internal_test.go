package etcd

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker/driver"
)

// A batch takes its keys in one txn, at one revision (its fence on every
// key); a batch one of whose keys a holder excludes takes none, writes
// nothing, and a shared batch beside shared holders is granted. Its
// release drops every entry in one txn.
func TestAcquireBatch(t *testing.T) {
	t.Parallel()
	l, d, c := testLocker(t)
	ctx := context.Background()
	prefix := "batch-" + t.Name() + "/"
	req := func(key string, mode driver.Mode) *driver.Request {
		return &driver.Request{Key: prefix + key, Owner: "o-" + key, ID: "id-" + key + mode.String(), Mode: mode, TTL: 10 * time.Second, KeepAlive: true}
	}
	before, err := c.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	gs, err := d.AcquireBatch(ctx, []*driver.Request{req("a", driver.Exclusive), req("b", driver.Exclusive), req("c", driver.Shared)})
	if err != nil || len(gs) != 3 {
		t.Fatalf("AcquireBatch of 3 free keys = %v, %v", gs, err)
	}
	for i, g := range gs {
		if g.Hold == nil || g.Fence != gs[0].Fence || int64(g.Fence) <= before.Header.Revision {
			t.Errorf("grant %d = %+v; want a hold fenced as the others, above revision %d", i, g, before.Header.Revision)
		}
	}
	refused, err := d.AcquireBatch(ctx, []*driver.Request{req("c", driver.Shared), req("d", driver.Exclusive), req("a", driver.Shared)})
	if err != nil || len(refused) != 3 || refused[0].Hold != nil || refused[1].Hold != nil || refused[2].Hold != nil {
		t.Fatalf("AcquireBatch with a key held exclusively = %v, %v; want every request refused", refused, err)
	}
	if n := count(t, c, d.queue(driver.Plain, prefix+"d")); n != 0 {
		t.Errorf("a refused batch left %d entries on its free key", n)
	}
	shared, err := d.AcquireBatch(ctx, []*driver.Request{req("c", driver.Shared), req("e", driver.Shared)})
	if err != nil || shared[0].Hold == nil || shared[1].Hold == nil {
		t.Fatalf("shared AcquireBatch beside a shared holder = %v, %v; want granted", shared, err)
	}
	var hs []driver.Hold
	for _, g := range append(gs, shared...) {
		hs = append(hs, g.Hold)
	}
	errs, err := d.ReleaseBatch(ctx, hs)
	if err != nil || len(errs) != len(hs) {
		t.Fatalf("ReleaseBatch = %v, %v", errs, err)
	}
	if n := count(t, c, d.prefix+escape(prefix)); n != 0 {
		t.Errorf("%d entries left after ReleaseBatch", n)
	}
	if _, err := l.TryLock(ctx, prefix+"a"); err != nil {
		t.Errorf("TryLock after ReleaseBatch: %v", err)
	}
}

func count(t *testing.T, c *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := c.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}
