//go:build race

package sql_test

// raceBuild says the race detector is on: the pure-Go SQLite driver runs
// tens of times slower under it.
const raceBuild = true
