package history

import "sync"

// FencedCounter is the resource a recorded workload protects with its
// locks: a counter that refuses a write whose fence is below the highest it
// has seen, as a fenced store should. Holders read it, then write it back
// plus one with their lease's fence; if two holders ever overlap, an update
// is lost and Exact reports it. The zero value is ready; it is safe for
// concurrent use.
type FencedCounter struct {
	mu              sync.Mutex
	fence           uint64
	value, accepted int
}

// Read returns the counter's value.
func (c *FencedCounter) Read() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.value
}

// Write sets the counter to v unless fence is below the highest seen, and
// reports whether it did.
func (c *FencedCounter) Write(fence uint64, v int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fence < c.fence {
		return false
	}
	c.fence, c.value = fence, v
	c.accepted++
	return true
}

// Exact reports the counter's value and the number of writes it accepted:
// equal unless an update was lost.
func (c *FencedCounter) Exact() (value, accepted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.value, c.accepted
}
