package zookeeper

import (
	"github.com/go-zookeeper/zk"
)

// A session the Locker connected itself has go-zookeeper hand every watch
// event to a callback (zk.WithEventCallback), which finds the hold by its
// node's path: a Locker with 10,000 holds then has no goroutine per hold
// waiting on its node's watch. (A connection passed to New has no such
// callback: there a goroutine per hold watches, watchHold.)
//
// go-zookeeper runs the callback for an event before it delivers the
// event to the watch's channel, from its reading loop, so the callback
// makes no call of its own (a call waits for that loop): it re-arms a
// watch in a goroutine of its own, as rarely as a node of ours changes.

// recentMax bounds the events of nodes not (yet) registered as holds that
// a session remembers: a node granted just as it changed finds its event
// there once registered.
const recentMax = 4096

// recent remembers the last watch events of unregistered nodes, by path.
type recent struct {
	events map[string]zk.EventType
	order  []string
}

func (r *recent) add(path string, t zk.EventType) {
	if r.events == nil {
		r.events = map[string]zk.EventType{}
	}
	if _, ok := r.events[path]; !ok {
		r.order = append(r.order, path)
	}
	r.events[path] = t
	if len(r.order) > recentMax {
		delete(r.events, r.order[0])
		r.order = r.order[1:]
	}
}

// take returns and forgets path's event, if any.
func (r *recent) take(path string) (zk.EventType, bool) {
	t, ok := r.events[path]
	delete(r.events, path)
	return t, ok
}

// event is s's go-zookeeper event callback.
func (s *session) event(ev zk.Event) {
	if f := s.dispatch.Load(); f != nil {
		(*f)(ev)
	}
}

// adopt routes the watch events of s, if its connection has the callback,
// to z's holds.
func (z *zkDriver) adopt(s *session) {
	if !s.callback {
		return
	}
	f := func(ev zk.Event) { z.onEvent(s, ev) }
	s.dispatch.Store(&f)
}

// onEvent handles one event of session s: a held node deleted is lost; one
// changed is watched again; the session expired loses every hold on it.
func (z *zkDriver) onEvent(s *session, ev zk.Event) {
	if ev.Type == zk.EventSession {
		switch ev.State {
		case zk.StateDisconnected:
			if !s.dropped.Swap(true) {
				z.Info("locker/zookeeper: connection lost; reconnecting within the session timeout", "server", ev.Server)
			}
		case zk.StateHasSession:
			if s.dropped.Swap(false) {
				z.Info("locker/zookeeper: connected again; the session lives on", "server", ev.Server)
			}
		case zk.StateExpired:
			holds := z.holdsOf(s)
			z.Warn("locker/zookeeper: session expired; its locks are lost", "locks", len(holds))
			for _, h := range holds {
				z.lose(h, false)
			}
		}
		return
	}
	if ev.Type != zk.EventNodeDeleted && ev.Type != zk.EventNodeDataChanged {
		return
	}
	z.mu.Lock()
	h := s.watched[ev.Path]
	if h == nil {
		s.recent.add(ev.Path, ev.Type)
	}
	z.mu.Unlock()
	if h != nil {
		z.holdEvent(h, ev.Type)
	}
}

// holdEvent acts on an event of held node h's watch.
func (z *zkDriver) holdEvent(h *hold, t zk.EventType) {
	if t == zk.EventNodeDeleted {
		z.lose(h, false)
		return
	}
	go func() { // nobody should write it; keep watching
		if ok, _, _, err := h.s.existsW(h.path); err != nil || !ok {
			z.lose(h, false)
		}
	}()
}

// watchNode has h's watch events reach it: through the session's callback
// if it has one (an event that came before h was registered is acted on
// now), else through a goroutine of its own. A node made without its
// watch has it set after armDelay (alone.go).
func (z *zkDriver) watchNode(h *hold) {
	z.mu.Lock()
	h.armed = h.watch != nil
	if !h.s.callback {
		z.mu.Unlock()
		go z.watchHold(h)
		return
	}
	h.s.watched[h.path] = h
	if h.watch == nil { // granted by the multi (alone.go)
		z.armLater(h)
	}
	t, early := h.s.recent.take(h.path)
	z.mu.Unlock()
	if early {
		z.holdEvent(h, t)
	}
}

// holdsOf lists the holds on session s.
func (z *zkDriver) holdsOf(s *session) []*hold {
	z.mu.Lock()
	defer z.mu.Unlock()
	var holds []*hold
	for h := range z.holds {
		if h.s == s {
			holds = append(holds, h)
		}
	}
	return holds
}
