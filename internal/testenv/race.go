//go:build race

package testenv

// Race says the tests run under the race detector, which multiplies the
// CPU a test needs several times over: tests that measure a backend at
// scale skip under it and run in scripts/test's non-race step.
const Race = true
