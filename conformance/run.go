package conformance

import (
	"errors"
	"testing"

	"github.com/locker-go/locker/conformance/history"
)

// Run runs every check of [Checks] against the backend h drives, each as a
// parallel subtest of t named after it: a check's error fails its subtest,
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
	for _, c := range Checks() {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
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
