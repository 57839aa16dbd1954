package redsync

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locker-go/locker/driver"
)

// news is what a driver heard on the keys it waits for: releases, "<id>
// <fence>[ <stamp> <mode> <call id>[ h <hold id> <counter> <ms
// pending>]]" (the id of the attempt that created the holder that ended,
// none for a mark removed or a forced release; then the first waiting
// mark left, if any, or the one the key was handed to, with the hold:
// handoff.go). It is kept per hub key: a
// key's waiters in one mode. Earlier versions also announced takes,
// "t<id> <ttl ms> <fence> <mode>": they are ignored.
//
// Every master that drops a holder publishes its release: a release wakes
// the waiters once, when a quorum of copies is heard, as then it has
// taken effect (a waiter woken by the first copy would meet the holder
// still on masters yet to drop it); should the quorum not come (masters
// down, a subscription being redialled), releaseSpread after the first.
type news struct {
	mu   sync.Mutex
	need int                 // copies of a release that wake
	keys map[string]*keyNews // the hub keys waited for here
}

type keyNews struct {
	released   []release  // recent releases, newest last
	releasedAt time.Time  // when a copy of a release was last heard
	next       waiter     // the first waiter, as the last release said
	handed     []handCopy // recent hand-offs' copies, newest last
}

// handsKept is how many copies of hand-offs a key keeps: a few releases'.
const handsKept = 32

// waiter is the first waiting mark of a key, as a release names it: a
// waiter it is not, and whose mode it excludes, need not look again.
type waiter struct {
	ok    bool
	stamp int64
	mode  driver.Mode
	call  string
}

// before reports whether w stands before the mark (stamp, call).
func (w waiter) before(stamp int64, call string) bool {
	return w.ok && (w.stamp < stamp || w.stamp == stamp && w.call < call)
}

// parseWaiter reads " <stamp> <mode> <call id>" (none: !ok).
func parseWaiter(f []string) waiter {
	if len(f) != 3 {
		return waiter{}
	}
	stamp, err1 := strconv.ParseInt(f[0], 10, 64)
	mode, err2 := strconv.ParseUint(f[1], 10, 8)
	return waiter{ok: err1 == nil && err2 == nil, stamp: stamp, mode: driver.Mode(mode), call: f[2]}
}

// release is one release heard, by its id: how many copies, and whether
// it woke the waiters yet.
type release struct {
	id      string
	copies  int
	masters uint64 // the masters whose copy was heard: one copy each (handHere)
	woke    bool
	handed  bool // a copy handed the key to a call here (handoff.go)
}

// releaseSpread is how long after the first copy of a release the
// waiters are woken, if a quorum of copies has not come by then.
const releaseSpread = 20 * time.Millisecond

// takePrefix begins an earlier version's take announcement.
const takePrefix = "t"

// watch starts recording what is heard of key; forget ends it.
func (n *news) watch(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.keys[key] == nil {
		n.keys[key] = &keyNews{}
	}
}

func (n *news) forget(key string) {
	n.mu.Lock()
	delete(n.keys, key)
	n.mu.Unlock()
}

// heard records a message from a master and reports whether it must
// wake the key's waiters now, and the id of a release first heard, whose
// waiters are woken at releaseSpread unless a quorum of copies did it
// (settle).
func (n *news) heard(key, payload string, master int) (wake bool, first string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := n.keys[key]
	if k == nil {
		return false, ""
	}
	if strings.HasPrefix(payload, takePrefix) { // an earlier version's take
		return false, ""
	}
	id, rest, _ := strings.Cut(payload, " ")
	if id != "" && k.heardFrom(id, master) {
		return false, "" // its copy came by the releaser's reply (handHere)
	}
	f := strings.Fields(rest)
	if len(f) > 0 {
		f = f[1:] // the fence released
	}
	k.releasedAt = time.Now()
	handed := len(f) == 7 && f[3] == "h"
	if handed {
		k.heardHandoff(f[4:], master)
		f = f[:3]
	}
	next := parseWaiter(f)
	if id == "" {
		k.next = next
		return true, ""
	}
	i := slices.IndexFunc(k.released, func(r release) bool { return r.id == id })
	if i < 0 {
		k.released = append(k.released[max(len(k.released)-3, 0):], release{id: id}) // the last 4
		i, first, k.next = len(k.released)-1, id, next
	} else if !next.ok || k.next.before(next.stamp, next.call) {
		// The copies disagree (a master lags): the later waiter, or none,
		// so that no waiter that may be first stays put.
		k.next = next
	}
	r := &k.released[i]
	r.copies++
	r.masters |= 1 << master
	r.handed = r.handed || handed
	if r.copies >= n.need && !r.woke {
		r.woke = true
		return true, first
	}
	// A Limited waiter handed a slot holds it once more masters than a
	// release's quorum handed it (quorumOf): each later copy wakes it again.
	return handed && r.woke && next.mode == driver.Limited, first
}

// heardFrom reports whether master's copy of release id was heard.
func (k *keyNews) heardFrom(id string, master int) bool {
	i := slices.IndexFunc(k.released, func(r release) bool { return r.id == id })
	return i >= 0 && k.released[i].masters&(1<<master) != 0
}

// heardHandoff records "<hold id> <counter> <ms pending>" from master.
func (k *keyNews) heardHandoff(f []string, master int) {
	counter, err1 := strconv.ParseUint(f[1], 10, 64)
	ms, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	c := handCopy{id: f[0], master: master, counter: counter, pended: time.Duration(ms) * time.Millisecond, heard: time.Now()}
	k.handed = append(k.handed[max(len(k.handed)-handsKept+1, 0):], c)
}

// handedTo is the copies heard of the hand-off of hold id on key, one per
// master, from the masters that on marks.
func (n *news) handedTo(key, id string, on []bool) []handCopy {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := n.keys[key]
	if k == nil {
		return nil
	}
	var out []handCopy
	for _, c := range k.handed {
		if c.id == id && c.master < len(on) && on[c.master] &&
			!slices.ContainsFunc(out, func(o handCopy) bool { return o.master == c.master }) {
			out = append(out, c)
		}
	}
	return out
}

func (k *keyNews) heardRelease(id string) bool {
	return slices.ContainsFunc(k.released, func(r release) bool { return r.id == id })
}

// behind reports whether the last release of key named a first waiter
// before the mark (stamp, call) that excludes mode.
func (n *news) behind(key string, mode driver.Mode, stamp int64, call string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := n.keys[key]
	return k != nil && k.next.before(stamp, call) && !mode.Compatible(k.next.mode)
}

// settle reports whether the release id of key has yet to wake its
// waiters, and counts it as having woken them.
func (n *news) settle(key, id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := n.keys[key]
	if k == nil {
		return false
	}
	i := slices.IndexFunc(k.released, func(r release) bool { return r.id == id })
	if i < 0 || k.released[i].woke {
		return false
	}
	k.released[i].woke = true
	return true
}

// handedOff reports whether a copy of the release id of key handed the
// key to a call of this driver.
func (n *news) handedOff(key, id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := n.keys[key]
	return k != nil && slices.ContainsFunc(k.released, func(r release) bool { return r.id == id && r.handed })
}

// announced reports whether the release of the hold with id was heard.
func (n *news) announced(key, id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := n.keys[key]
	return k != nil && k.heardRelease(id)
}

// releasedSince reports whether a release of key was heard after since.
func (n *news) releasedSince(key string, since time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := n.keys[key]
	return k != nil && k.releasedAt.After(since)
}
