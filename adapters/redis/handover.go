package redis

import (
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// A release's grant reaches its waiter by the message the release script
// publishes, a trip through the server and the subscriber's connection
// that comes well after the script's reply. A waiter of the releasing
// process (any of its Lockers) is handed its grant from the reply
// instead (handOver); the message that follows then gives nothing: each
// grant is given once, whichever comes first.

// subscribers are this process's subscribers, by id.
var subscribers sync.Map

// handOver hands the grant a release script reported ({1, token, fence})
// to its waiter, if it waits in this process, and lets it run.
func handOver(res any) {
	r, ok := res.([]any)
	if !ok || len(r) != 3 {
		return
	}
	token, _ := r[1].(string)
	f, _ := r[2].(string) // the script formats it
	fence, err := strconv.ParseUint(f, 10, 64)
	client, _, _ := strings.Cut(token, ".")
	v, found := subscribers.Load(client)
	if err != nil || !found {
		return
	}
	s := v.(*subscriber)
	if s.heard(token, fence) {
		s.hub.Notify(token)
		// the grantee only takes its grant: let it run now, not when this
		// caller next blocks
		runtime.Gosched()
	}
}

// releasedBy reads a release script's reply: whether the hold was there.
func releasedBy(res any) bool {
	switch r := res.(type) {
	case int64:
		return r == 1
	case []any:
		return true
	}
	return false
}

// heard keeps the grant of fence for the waiter token, unless token no
// longer waits or was given it (or a later one) already: a grant comes
// twice to a waiter of the releasing process, the reply's and the
// message's, in either order. Were it given again after its call took it,
// a call that gave it back dead and waits on would take a hold already
// released.
func (s *subscriber) heard(token string, fence uint64) bool {
	s.handMu.Lock()
	defer s.handMu.Unlock()
	if fence <= s.gave[token] || !s.hub.Waiting(token) {
		return false
	}
	if s.hands == nil {
		s.hands, s.gave = map[string]uint64{}, map[string]uint64{}
	}
	s.hands[token], s.gave[token] = fence, fence
	return true
}

// stopped forgets what was given to token, whose call stopped waiting.
func (s *subscriber) stopped(token string) {
	s.handMu.Lock()
	defer s.handMu.Unlock()
	delete(s.gave, token)
	delete(s.hands, token)
}
