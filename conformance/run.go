package conformance

import (
	"errors"
	"slices"
	"testing"

	"github.com/locker-go/locker/conformance/history"
)

// Run runs every check of [Checks] against the backend h drives, each as a
// subtest of t named after it, those marked Alone first, one at a time,
// then the others in parallel: a check's error fails its subtest,
// a *SkipError skips it with its reason. Unless h.Prefix is set, keys
// begin with "conformance-<random>/" and t's name.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewLocker == nil {
		t.Fatal("conformance: Harness needs NewLocker")
	}
	if h.Prefix == "" {
		h.Prefix = h.prefix() + t.Name() + "/"
	}
	// The checks that must run alone run first, one at a time; the others
	// then run together (parallel subtests start once Run returns).
	checks := Checks()
	slices.SortStableFunc(checks, func(a, b Check) int { return boolOrder(b.Alone) - boolOrder(a.Alone) })
	for _, c := range checks {
		t.Run(c.Name, func(t *testing.T) {
			if !c.Alone {
				t.Parallel()
			}
			h := h
			if h.Log == nil {
				h.Log = t.Logf
			}
			err := c.Run(t.Context(), h)
			var s *SkipError
			switch {
			case err == nil:
			case errors.As(err, &s):
				t.Skip(s.Reason)
			default:
				history.WriteArtifact(t, err)
				t.Fatal(err)
			}
		})
	}
}

// boolOrder is 1 for true, for sorting.
func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}
