package sql

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locker-go/locker/driver"
)

// A hand-off: a release grants the key to the waiters it admits, and the
// waiter's next attempt returns that grant without a statement. On
// Postgres (pgHandoffFunc) the release grants every waiter it admits, and
// each waiter's notification carries its fence, "token fence" (the
// release's answer carries the same, for the waiters of its own process,
// which then need not wait for the NOTIFY: handedHere); the grant
// is valid from no earlier than the start of the waiter's last attempt
// that found itself still waiting (a release before that attempt would
// have let it find the grant), which is where its validity is counted
// from. Where this process's releases wake its waiters and the database
// keeps no queue of them (SQLite; Postgres without LISTEN), a modal
// transaction grants the admitted waiters at the head of the
// queue that wait in this process (txn.handOff), valid from the
// transaction's start. On MySQL a release of an Exclusive hold grants
// the key, in the same transaction (myXReleaseProc), to this process's
// first waiter if it is the first live waiter of the database's queue
// (the process's gate then keeps the key's name: no other process is
// woken), valid from before the release began. Should a waiter not take
// its hand-off, its next attempt finds the hold under its ID, as a retry
// after a lost reply does, and Abandon releases it.

// handoffs are the hand-offs heard for this process's waiters, by token.
type handoffs struct {
	mu    sync.Mutex
	m     map[string]handoff
	found map[string]bool // calls that took a hold under their ID from the database before it was handed over
	// gave is the fence of the last grant heard for each waiting token: a
	// Postgres grant comes twice to a waiter in the releasing process (the
	// release's answer and the NOTIFY), in either order, and is given once.
	gave   map[string]uint64
	taken  uint64        // grants taken from hand-offs, for tests and telemetry
	direct atomic.Uint64 // releases that handed the key over directly (handdirect.go)
}

// handoff is one grant handed to a waiter: its fence, and when its
// validity starts (zero: the waiter's last attempt that found it waiting).
type handoff struct {
	fence uint64
	start time.Time
}

// heard parses a notification's payload, keeping a hand-off's fence if
// waiting says a waiter here wants it and it was not heard already, and
// returns the token to wake and whether it kept a grant.
func (h *handoffs) heard(payload string, waiting func(token string) bool) (string, bool) {
	token, fence, ok := strings.Cut(payload, " ")
	if !ok {
		return payload, false
	}
	f, err := strconv.ParseUint(fence, 10, 64)
	if err != nil || f == 0 {
		return token, false
	}
	// waiting is asked under mu, so that a waiter that stops waiting and
	// then takes its token's entry (Subscribe's stop) leaves none behind.
	h.mu.Lock()
	defer h.mu.Unlock()
	if !waiting(token) || f <= h.gave[token] {
		// A grant heard twice is given once: given again after its
		// waiter took it, a Lock that gave back a dead grant and asks
		// again under the same ID would take a hold already released.
		// Nor does a late copy of an earlier grant (its fence lower:
		// one sequence draws them, and a call is granted again only
		// after it gave the last back) replace a later one.
		return token, false
	}
	h.mark(token, f)
	h.give(token, handoff{fence: f})
	return token, true
}

// mark records f as the last grant given to token. Callers hold h.mu.
func (h *handoffs) mark(token string, f uint64) {
	if h.gave == nil {
		h.gave = map[string]uint64{}
	}
	h.gave[token] = f
}

// held records that token's call holds the grant of fence f, which its
// own statement found under its ID (a release granted it as the
// statement ran): the hand-off of that grant, heard before or after, is
// not given (a call that gives the grant back, dead, would take it
// again, and waste a try on it). Only for a waiting call, whose entries
// stopped takes.
func (h *handoffs) held(token string, f uint64, waiting func(token string) bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !waiting(token) {
		return
	}
	if g, ok := h.m[token]; ok && g.fence <= f {
		delete(h.m, token)
	}
	if f > h.gave[token] {
		h.mark(token, f)
	}
}

// stopped takes token's entries as its call stops waiting, reporting
// whether a hand-off was left untaken.
func (h *handoffs) stopped(token string) bool {
	if h == nil {
		return false
	}
	_, ok := h.take(token)
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.gave, token)
	return ok
}

// grant keeps token's hand-off g if waiting says its call still waits,
// reporting whether it did.
func (h *handoffs) grant(token string, g handoff, waiting func(token string) bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.keep(token, g, waiting)
}

// keep is grant, for callers that hold h.mu.
func (h *handoffs) keep(token string, g handoff, waiting func(token string) bool) bool {
	if !waiting(token) {
		return false
	}
	h.give(token, g)
	delete(h.found, token)
	return true
}

// give keeps token's hand-off. Callers hold h.mu.
func (h *handoffs) give(token string, g handoff) {
	if h.m == nil {
		h.m = map[string]handoff{}
	}
	h.m[token] = g
}

// foundOwn records that id's call took, as its grant, the hold it found
// under its ID in the database: on MySQL a hand-off is committed before
// it is handed over, and the waiter's attempt in between finds it. Handed
// over after the call stopped waiting, it is then the call's lease, not
// an orphan to release. Already handed over, the call's stop takes it.
func (h *handoffs) foundOwn(id string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, given := h.m[id]; given {
		return
	}
	if h.found == nil {
		h.found = map[string]bool{}
	}
	h.found[id] = true
}

// forget drops id's foundOwn mark: its hold is gone (released), so a
// hand-off to it handed over only now, if any, is an orphan.
func (h *handoffs) forget(id string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.found, id)
}

// take returns and forgets token's hand-off, if one was heard.
func (h *handoffs) take(token string) (handoff, bool) {
	if h == nil {
		return handoff{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.m[token]
	if ok {
		delete(h.m, token)
		h.taken++
	}
	return g, ok
}

// handedHere gives the grants that a release here made ("token fence",
// comma-separated, as the release function returns them) to the waiters
// of this process among them, and wakes them: the NOTIFY that carries
// each grant too reaches them later, a round trip through the server
// and its LISTEN connection that a hand-off in this process need not
// wait for. heard gives each grant once, whichever comes first; waiters
// of other processes hear theirs by NOTIFY.
func (d *sqlDriver) handedHere(granted string) {
	if d.handoffs == nil || d.hub == nil {
		return
	}
	for _, g := range strings.Split(granted, ",") {
		if token, ok := d.handoffs.heard(g, d.hub.Waiting); ok {
			d.hub.Notify(token)
		}
	}
}

// handedOff returns r's grant if a release handed the key to it.
func (d *sqlDriver) handedOff(r *driver.Request, c *call) (driver.Grant, bool) {
	g, ok := d.handoffs.take(r.ID)
	if !ok {
		return driver.Grant{}, false
	}
	c.mayHold = true       // should the call fail after all (Close came first)
	d.gates.granted(r.Key) // MySQL: this process holds the key (its gate keeps the name)
	hd := (&hold{d: d, key: r.Key, owner: r.Owner, id: r.ID, fence: g.fence, ttl: r.TTL, mode: r.Mode, waited: true}).written()
	if g.start.IsZero() {
		g.start = c.waited
	}
	c.stray = !c.placeHeard.Before(g.start) && !c.placeHeard.IsZero()
	return driver.Grant{Hold: hd, Fence: g.fence, Start: g.start}, true
}

// settle takes out of the queue the place that a hand-off's waiter may
// have put back (call.stray): a place kept with no look at the key
// (MySQL's placeOnce) whose reply came after the release that handed it
// the key began may have landed after that release deleted the place.
// Left there, it would keep every other process's claim waiting for it
// to lapse. Should this fail, the call fails and Abandon takes back the
// hold and the place.
func (d *sqlDriver) settle(ctx context.Context, r *driver.Request, c *call) error {
	if !c.stray {
		return nil
	}
	c.stray = false
	return d.retry(ctx, func(ctx context.Context) error {
		_, err := d.pool().ExecContext(ctx, d.q.leave, r.Key, d.token(r))
		return err
	}, nil)
}

// handed is a grant that a transaction handed to a waiter here.
type handed struct {
	id, owner string
	fence     uint64
	mode      driver.Mode
}

// handOff grants, in t, the waiters that s admits at the head of the
// queue while they wait in this process for a modal grant (a run of
// readers, or a writer where Exclusive waiters are modal): each is then
// told at commit (handOver), and takes its grant with no transaction of
// its own. It stops at the first it cannot grant here (another
// process's, a re-entry), which is woken as before, and at a Limited
// waiter unless the transaction granted a Limited request itself: a
// release wakes Limited waiters, and the first to look takes its slot
// and hands the others admitted then theirs, in one transaction, so that
// the slots freed meanwhile are granted together.
func (t txn) handOff(ctx context.Context, key string, s *modeState) ([]handed, error) {
	var out []handed
	for len(s.wake) > 0 {
		w := t.d.local.request(key, s.wake[0])
		if w == nil || !t.d.modal(w) || w.Mode == driver.Limited && !s.limitedGrant {
			break // a Limited waiter is woken by a release (limit.go)
		}
		if v, err := s.decide(w, w.ID); err != nil || !v.ok || v.join != nil {
			break
		}
		g, err := t.grant(ctx, w, s, nil) // takes it out of the queue; s.wake is the next
		if err != nil {
			return nil, err
		}
		out = append(out, handed{id: w.ID, owner: w.Owner, fence: g.Fence, mode: w.Mode})
	}
	return out, nil
}

// handsOffHere reports whether this process's modal transactions hand
// the key to this process's waiters (txn.handOff): where its releases wake
// them and the database keeps no queue that a release could grant from.
func (d *sqlDriver) handsOffHere() bool { return d.poll && !d.queued }

// handOver tells the waiters their hand-offs, valid from start (before
// the transaction that made them began). A waiter that stopped waiting
// since (its call ended: granted otherwise, or given up with nothing to
// abandon) gets none: the grant is released here, unless the call took it
// from the database itself (foundOwn).
func (d *sqlDriver) handOver(ctx context.Context, key string, hs []handed, start time.Time) {
	if len(hs) == 0 {
		return
	}
	orphans := d.give(hs, start)
	for _, h := range hs {
		d.hub.Notify(h.id)
	}
	// Let a grantee run now: it only takes its grant, but woken onto this
	// goroutine's processor it would wait until this caller blocks (its
	// next Lock's statements, on SQLite all CPU) or another processor
	// steals it: 70 µs a hand-off where it then ran in 7.
	runtime.Gosched()
	for _, h := range orphans {
		// Not here: the caller may hold the gate (SQLite) that a release
		// takes. The release's retries are bounded by the retry timeout.
		go func() {
			_ = (&hold{d: d, key: key, id: h.id, fence: h.fence, mode: h.mode, owner: h.owner}).Release(context.WithoutCancel(ctx))
		}()
	}
}

// give keeps the hand-offs of the waiters still waiting and returns the
// others' that no call took: the orphans.
func (d *sqlDriver) give(hs []handed, start time.Time) (orphans []handed) {
	d.handoffs.mu.Lock()
	defer d.handoffs.mu.Unlock()
	for _, h := range hs {
		// Asked under mu: a waiter's Subscribe stops waiting, then takes
		// its entry under mu, so each grant is taken or an orphan here.
		switch {
		case d.handoffs.keep(h.id, handoff{fence: h.fence, start: start}, d.hub.Waiting):
		case d.handoffs.found[h.id]:
			delete(d.handoffs.found, h.id) // the call's lease
		default:
			orphans = append(orphans, h)
		}
	}
	return orphans
}

// waitedSince records that an attempt begun at start found r waiting
// in the database's queue: a release may hand it the key from now on, so
// Abandon must look for a hold under its ID.
func (c *call) waitedSince(start time.Time) {
	c.waited, c.mayHold = start, true
}
