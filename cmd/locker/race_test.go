//go:build race

package main

// raceBuild makes the tests build the binary with -race when they run with it.
const raceBuild = true
