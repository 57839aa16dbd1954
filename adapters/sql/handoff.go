package sql

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locker-go/locker/driver"
)

// A hand-off: where a release grants the key to the waiters it admits
// (Postgres, pgHandoffFunc), each waiter's notification carries its
// fence, "token fence", and the waiter's next attempt returns that grant
// without a statement. The grant is valid from no earlier than the start
// of the waiter's last attempt that found itself still waiting (a release
// before that attempt would have let it find the grant), which is where
// its validity is counted from. Should the notification be lost, the
// waiter's next attempt finds the hold under its ID, as a retry after a
// lost reply does.

// handoffs are the hand-offs heard for this process's waiters, by token.
type handoffs struct {
	mu    sync.Mutex
	m     map[string]uint64
	taken uint64 // grants taken from hand-offs, for tests and telemetry
}

// heard parses a notification's payload, keeping a hand-off's fence if
// waiting says a waiter here wants it, and returns the token to wake.
func (h *handoffs) heard(payload string, waiting func(token string) bool) string {
	token, fence, ok := strings.Cut(payload, " ")
	if !ok {
		return payload
	}
	f, err := strconv.ParseUint(fence, 10, 64)
	if err != nil || f == 0 {
		return token
	}
	// waiting is asked under mu, so that a waiter that stops waiting and
	// then takes its token's entry (Subscribe's stop) leaves none behind.
	h.mu.Lock()
	defer h.mu.Unlock()
	if !waiting(token) {
		return token
	}
	if h.m == nil {
		h.m = map[string]uint64{}
	}
	h.m[token] = f
	return token
}

// take returns and forgets token's hand-off, if one was heard.
func (h *handoffs) take(token string) (uint64, bool) {
	if h == nil {
		return 0, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.m[token]
	if ok {
		delete(h.m, token)
		h.taken++
	}
	return f, ok
}

// handedOff returns r's grant if a release handed the key to it.
func (d *sqlDriver) handedOff(r *driver.Request, c *call) (driver.Grant, bool) {
	f, ok := d.handoffs.take(r.ID)
	if !ok {
		return driver.Grant{}, false
	}
	hd := &hold{d: d, key: r.Key, owner: r.Owner, id: r.ID, fence: f, ttl: r.TTL, mode: r.Mode}
	return driver.Grant{Hold: hd, Fence: f, Start: c.waited}, true
}

// waitedSince records that an attempt begun at start found r waiting
// in the database's queue: a release may hand it the key from now on, so
// Abandon must look for a hold under its ID.
func (c *call) waitedSince(start time.Time) {
	c.waited, c.mayHold = start, true
}
