// Package perproc holds what the Lockers of a process share per key: a
// connection pool, a LISTEN connection, a client.
package perproc

import (
	"context"
	"sync"
)

// Map holds what the Lockers of this process share per key: a value
// made by the first Locker that asks for it and closed after the last lets
// it go. 400 Lockers opened on one URL then cost one connection pool and
// one LISTEN connection, not 400 of each (a server allows a few hundred).
// The zero Map is empty and ready to use.
type Map[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]*entry[V]
}

type entry[V any] struct {
	ready chan struct{} // closed once v or err is set
	v     V
	err   error
	refs  int
}

// Get returns key's value, made by open if no other Locker holds it, and
// the func that lets it go (once), closing it with shut after the last.
// A caller that found another's open under way waits for it; should that
// fail, the caller tries once more, so that a failure it reports is not
// merely another caller's cancelled context.
func (s *Map[K, V]) Get(ctx context.Context, key K, open func() (V, error), shut func(V)) (V, func(), error) {
	var zero V
	for tried := false; ; {
		s.mu.Lock()
		if s.m == nil {
			s.m = map[K]*entry[V]{}
		}
		e := s.m[key]
		if e == nil {
			e = &entry[V]{ready: make(chan struct{})}
			s.m[key] = e
			s.mu.Unlock()
			e.v, e.err = open()
			s.mu.Lock()
			if e.err != nil {
				delete(s.m, key)
			} else {
				e.refs++
			}
			close(e.ready)
			s.mu.Unlock()
			if e.err != nil {
				return zero, nil, e.err
			}
			return e.v, s.release(key, e, shut), nil
		}
		s.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return zero, nil, ctx.Err()
		}
		s.mu.Lock()
		if e.err == nil && s.m[key] == e {
			e.refs++
			s.mu.Unlock()
			return e.v, s.release(key, e, shut), nil
		}
		s.mu.Unlock()
		if e.err != nil {
			if tried {
				return zero, nil, e.err
			}
			tried = true
		}
	}
}

// release returns the func that lets e go, once.
func (s *Map[K, V]) release(key K, e *entry[V], shut func(V)) func() {
	return sync.OnceFunc(func() {
		s.mu.Lock()
		last := e.refs == 1
		if e.refs--; last && s.m[key] == e {
			delete(s.m, key)
		}
		s.mu.Unlock()
		if last {
			shut(e.v)
		}
	})
}

// Keys are the keys held now, in no order.
func (s *Map[K, V]) Keys() []K {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]K, 0, len(s.m))
	for k := range s.m {
		keys = append(keys, k)
	}
	return keys
}
