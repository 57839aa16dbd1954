//go:build race

package zookeeper_test

// raceBuild says the race detector is on.
const raceBuild = true
