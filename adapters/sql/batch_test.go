package sql

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// On SQLite a batch is one transaction: every key or none, a refused one
// leaves nothing, a mismatch is ErrModeMismatch; servers decline it.
func TestAcquireBatch(t *testing.T) {
	t.Parallel()
	ls := dialects(t)
	ctx := context.Background()
	prefix := "batch-" + rand.Text() + "/"
	req := func(key, owner string, mode driver.Mode, reentrant bool) *driver.Request {
		return &driver.Request{Key: prefix + key, Owner: owner, ID: rand.Text(), Mode: mode, Reentrant: reentrant, TTL: 10 * time.Second}
	}
	for name, l := range ls {
		if name == "sqlite" {
			continue
		}
		if _, err := l.sqlDriver.AcquireBatch(ctx, []*driver.Request{req("a", "o", 0, false)}); !errors.Is(err, driver.ErrSkip) {
			t.Errorf("%s: AcquireBatch = %v, want ErrSkip", name, err)
		}
	}
	d := ls["sqlite"].sqlDriver
	gs, err := d.AcquireBatch(ctx, []*driver.Request{req("b", "me", driver.Exclusive, true), req("a", "me", driver.Shared, true)})
	if err != nil || gs[0].Hold == nil || gs[1].Hold == nil || gs[0].Fence == gs[1].Fence {
		t.Fatalf("AcquireBatch of two free keys = %+v, %v; want both, with fences of their own", gs, err)
	}
	refused, err := d.AcquireBatch(ctx, []*driver.Request{req("c", "other", driver.Exclusive, false), req("a", "other", driver.Exclusive, false)})
	if err != nil || refused[0].Hold != nil || refused[1].Hold != nil || refused[1].Retry <= 0 {
		t.Fatalf("AcquireBatch with a held key = %+v, %v; want both refused, the held one with a Retry", refused, err)
	}
	if _, err := d.Status(ctx, driver.Plain, prefix+"c"); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("a refused batch left its free key held: %v", err)
	}
	if _, err := d.AcquireBatch(ctx, []*driver.Request{req("b", "me", driver.Shared, true)}); !errors.Is(err, locker.ErrModeMismatch) {
		t.Errorf("AcquireBatch in the other mode by the owner = %v, want ErrModeMismatch", err)
	}
	for _, g := range gs {
		if err := g.Hold.Release(ctx); err != nil {
			t.Error(err)
		}
	}
	if infos, err := d.List(ctx, prefix); err != nil || len(infos) != 0 {
		t.Errorf("List after the releases = %+v, %v; want nothing", infos, err)
	}
}
