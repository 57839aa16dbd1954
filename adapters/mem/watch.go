package mem

import (
	"context"

	"github.com/locker-go/locker/driver"
)

// Watch signals each new holder of key in space (grant.go's apply) and
// each change that wakes its waiters (a release, a holder found lapsed):
// in process, no change is missed, so no Announce is needed.
func (d *memDriver) Watch(_ context.Context, space driver.Space, key string) (<-chan struct{}, func(), error) {
	c, stop := d.s.listen(d.s.watches, name{space, key})
	return c, stop, nil
}

// listen adds a channel that buffers one signal to set[n] (the space's
// subscribers or watchers) and returns it with the function that removes it.
func (s *lockSpace) listen(set map[name]map[chan struct{}]struct{}, n name) (chan struct{}, func()) {
	c := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if set[n] == nil {
		set[n] = map[chan struct{}]struct{}{}
	}
	set[n][c] = struct{}{}
	return c, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(set[n], c)
		if len(set[n]) == 0 {
			delete(set, n)
		}
	}
}

// signal sends on each channel of cs that has no signal waiting. Callers
// hold s.mu.
func signal(cs map[chan struct{}]struct{}) {
	for c := range cs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}
