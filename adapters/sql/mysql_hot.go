package sql

import "time"

// Hot keys: a key whose last hold here had waited for it, and whose
// release left it to no waiter here, most likely has waiters of other
// processes queued. A new call for it here takes its place in the queue
// before it claims (myStatements.acquire), as a claim would most likely be
// refused: with several processes taking turns on a key, that spares each
// turn a claim's batch of statements. A call that then finds the key free
// with nobody ahead claims it at once, one round trip later, and the key
// cools.
//
// maxHot bounds the keys remembered: past it the set starts anew (a key
// forgotten only claims first once more).
const maxHot = 4096

// heat records that key's release here left it to waiters elsewhere.
func (gs *gates) heat(key string) {
	if gs == nil {
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.hot == nil || len(gs.hot) >= maxHot {
		gs.hot = map[string]time.Time{}
	}
	gs.hot[key] = time.Now()
}

// isHot reports whether key was heated within the last d.
func (gs *gates) isHot(key string, d time.Duration) bool {
	if gs == nil {
		return false
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	at, ok := gs.hot[key]
	return ok && time.Since(at) < d
}

// cool: key was found free with nobody ahead.
func (gs *gates) cool(key string) {
	if gs == nil {
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	delete(gs.hot, key)
}
