// Package peers measures, on the machine it runs on, the peer libraries of
// DESIGN.md's "Reference figures" next to locker's own adapters, each driven
// by conformance.Bench: the very workload of our conformance benchmarks
// (uncontended lock+unlock as a multiple of one plain round trip; 8 clients
// contending on one key, holding it 1 ms). Same machine, same servers, same
// code path for both sides, so our figures can be quoted as ratios to the
// peers' instead of against numbers taken elsewhere.
//
// It is a module of its own, so the root module's `go test ./...` does not
// run it and the root go.mod gains none of the peer libraries. Its only
// code is in tests; see README.md and scripts/bench-peers.
package peers
