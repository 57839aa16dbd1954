package conformance_test

import (
	"context"
	"errors"
	"testing"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/adapters/mem"
	"github.com/locker-go/locker/conformance"
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
