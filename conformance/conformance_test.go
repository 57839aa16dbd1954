package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/adapters/mem"
	"github.com/locker-go/locker/conformance"
	"github.com/locker-go/locker/conformance/history"
)

// The suite on the reference driver with only the required NewLocker, as
// `locker check` runs it: the checks that need Crash or Count report a
// skip with its reason; every other check passes.
func TestChecksWithoutCrashOrCount(t *testing.T) {
	h := conformance.Harness{
		NewLocker: func(context.Context) (locker.Locker, error) { return mem.New(t.Name()), nil },
		Prefix:    "self-test/",
	}
	for _, c := range conformance.Checks() {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			err := c.Run(context.Background(), h)
			var skip *conformance.SkipError
			switch {
			case errors.As(err, &skip):
				if skip.Reason == "" {
					t.Error("a skip without a reason")
				}
				t.Skip(skip.Reason)
			case err != nil:
				t.Fatal(err)
			}
		})
	}
}

// Clients that each lock in a space of their own, as processes pointed at
// different servers would: the Linearizable check finds the overlap and
// says so with a history it can draw.
func TestLinearizableFindsOverlap(t *testing.T) {
	n := 0
	h := conformance.Harness{
		NewLocker: func(context.Context) (locker.Locker, error) {
			n++
			return mem.New(fmt.Sprintf("%s-%d", t.Name(), n)), nil
		},
		Prefix: "self-test/",
	}
	for _, c := range conformance.Checks() {
		if c.Name != "Linearizable" {
			continue
		}
		err := c.Run(t.Context(), h)
		var v *history.Violation
		if !errors.As(err, &v) {
			t.Fatalf("Linearizable on split lock spaces = %v; want a *history.Violation", err)
		}
		return
	}
	t.Fatal("no Linearizable check")
}
