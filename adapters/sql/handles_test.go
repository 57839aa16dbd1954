package sql

import (
	"strings"
	"testing"

	"github.com/locker-go/locker"
)

// Lockers opened on one URL share one database handle, which outlives
// each of them until the last is closed.
func TestLockersOnOneURLShareAHandle(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite://" + dir + "/shared.db"
	ctx := t.Context()
	a, err := locker.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := locker.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	entries := func() (n int) {
		for _, k := range pools.Keys() {
			if strings.Contains(k, dir) {
				n++
			}
		}
		return n
	}
	before := entries()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	lease, err := b.Lock(ctx, "k")
	if err != nil {
		t.Fatalf("Lock on a Locker whose sibling on the same URL closed: %v", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if after := entries(); before != 1 || after != 0 {
		t.Fatalf("shared handles on the file: %d while open, %d after the last Close; want 1 and 0", before, after)
	}
}
