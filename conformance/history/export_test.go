package history

import (
	"errors"
	"testing"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/adapters/mem"
)

// Histories recorded apart and imported into one are checked together:
// legal halves make a legal whole; two halves each legal alone, whose
// grants of one key overlap, make a violation.
func TestExportImport(t *testing.T) {
	ctx := t.Context()

	// Legal: one space, two processes in turn.
	whole := New()
	for range 2 {
		r, l := New(), mem.New("export-legal")
		lease, err := r.Client().Lock(ctx, l, "k")
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		data, err := r.Export(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := whole.Import(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := whole.Check(ctx); err != nil {
		t.Fatalf("two legal halves: %v", err)
	}

	// Illegal: two spaces (two backends nobody bridged) hand out the same
	// key at once, each legal alone.
	bad := New()
	var open []locker.Lease
	var rs []*Recorder
	for _, space := range []string{"export-a", "export-b"} {
		r := New()
		lease, err := r.Client().Lock(ctx, mem.New(space), "k")
		if err != nil {
			t.Fatal(err)
		}
		open, rs = append(open, lease), append(rs, r)
	}
	for i, r := range rs {
		if err := open[i].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		data, err := r.Export(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := bad.Import(data); err != nil {
			t.Fatal(err)
		}
	}
	var v *Violation
	if err := bad.Check(ctx); !errors.As(err, &v) {
		t.Fatalf("overlapping grants from two imports: %v, want a *Violation", err)
	}
	if err := bad.Import([]byte(`[{"c":0,"k":9,"key":"k","call":1,"ret":2}]`)); err == nil {
		t.Fatal("an operation of no known kind was imported")
	}
}
