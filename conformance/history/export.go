package history

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/anishathalye/porcupine"
)

// A history gathered from several processes: each child records its own
// clients through a Recorder and Exports it; the parent Imports each, so
// that one Check covers the processes together. Times cross as readings of
// the machine's monotonic clock (clock_unix.go; elsewhere, a wall-clock
// sample plus the monotonic time since).

// exported is one operation as Export writes it.
type exported struct {
	Client  int    `json:"c"`
	Kind    kind   `json:"k"`
	Key     string `json:"key"`
	Shared  bool   `json:"s,omitempty"`
	Subtree bool   `json:"t,omitempty"`
	Lease   int    `json:"l,omitempty"`
	Result  result `json:"r,omitempty"`
	Fence   uint64 `json:"f,omitempty"`
	Call    int64  `json:"call"`
	Return  int64  `json:"ret"` // math.MaxInt64: runs on past the history
}

// Export waits until every lease granted in the history has ended, as
// Check does, and returns the history for Import in another process.
func (r *Recorder) Export(ctx context.Context) ([]byte, error) {
	if err := r.wait(ctx); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	base := r.start
	out := make([]exported, len(r.ops))
	for i, op := range r.ops {
		in, o := op.Input.(input), op.Output.(output)
		ret := op.Return
		if ret != math.MaxInt64 {
			ret += base
		}
		out[i] = exported{Client: op.ClientId, Kind: in.kind, Key: in.key, Shared: in.shared, Subtree: in.subtree,
			Lease: in.lease, Result: o.result, Fence: o.fence, Call: op.Call + base, Return: ret}
	}
	return json.Marshal(out)
}

// Import adds a history that Export wrote in another process: its clients
// and leases become new ones of r.
func (r *Recorder) Import(data []byte) error {
	var ops []exported
	if err := json.Unmarshal(data, &ops); err != nil {
		return fmt.Errorf("history: import: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	base, clients, leases := r.start, r.clients, r.leases
	for _, e := range ops {
		if e.Kind > failed || e.Result > other {
			return fmt.Errorf("history: import: operation %+v is not one of ours", e)
		}
		in := input{kind: e.Kind, key: e.Key, shared: e.Shared, subtree: e.Subtree}
		if e.Lease > 0 {
			in.lease = leases + e.Lease
			r.leases = max(r.leases, in.lease)
		}
		ret := e.Return
		if ret != math.MaxInt64 {
			ret -= base
		}
		r.clients = max(r.clients, clients+e.Client+1)
		r.ops = append(r.ops, porcupine.Operation{ClientId: clients + e.Client, Input: in, Call: e.Call - base,
			Output: output{result: e.Result, fence: e.Fence}, Return: ret})
	}
	return nil
}

// wait waits until every lease granted in the history has ended.
func (r *Recorder) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { r.live.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("history: leases still live: %w", ctx.Err())
	}
}
