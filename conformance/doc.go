// Package conformance checks that a locker.Locker keeps the guarantees of
// the locker contract, against a real backend. Every adapter in this module
// runs it, and so can a third-party adapter:
//
//	func TestConformance(t *testing.T) {
//		var crasher faultproxy.Crasher // optional: for the crash check
//		t.Cleanup(func() { _ = crasher.Close() })
//		conformance.Run(t, conformance.Harness{
//			NewLocker: func(ctx context.Context) (locker.Locker, error) { ... },
//			Crash:     crasher.Crash, // optional
//			Count:     func(ctx context.Context, prefix string) (int, error) { ... }, // optional
//		})
//	}
//
// Run runs each of [Checks] as a parallel subtest, on keys of its own, so
// one backend serves them all. A check is a plain function that returns an
// error, so the same checks run outside go test too: `locker check` runs
// them against a live deployment, and so can any program:
//
//	for _, c := range conformance.Checks() {
//		err := c.Run(ctx, h)
//		var skip *conformance.SkipError
//		switch {
//		case err == nil: // passed
//		case errors.As(err, &skip): // not run: skip.Reason says why
//		default: // failed: err says how
//		}
//	}
//
// [Bench] runs the standard benchmarks with the same Harness.
// Package faultproxy, under this one, crashes clients for Harness.Crash.
package conformance
