package redsync

import (
	"strconv"
	"strings"

	"github.com/locker-go/locker/driver"
)

// name is a key in its space. On each master its records are a few Redis
// keys under the Locker's prefix, by space ("l" plain, "t" subtree):
//
//	<prefix>l:<key>       the anchor, a hash: the holders' fences, holds and
//	                      creators, the Exclusive holder and its expiry, the
//	                      key's last fence, and o = "" (scripts.go)
//	<prefix>l<m>:<key>    the holders in mode m (1 S, 2 IS, 3 IX, 4 L): a
//	                      sorted set of owners by expiry (ms, master's clock)
//	<prefix>lw:<key>      the waiting marks by expiry: "<m><call id>"
//	<prefix>lq<m>:<key>   the waiting marks of mode m (0 X too) by place:
//	                      call ids scored by their call's stamp
//	<prefix>lp:<key>      the holds that Exclusive marks wait to be handed
//	                      (handoff.go), a hash: call id -> "<hold id> <ttl
//	                      ms> <set at, ms> <driver id> <owner>"
//
// and its channel is <prefix>r:<key> (<prefix>rt:<key> for a subtree path).
// The fence counter, <prefix>fence, is one for every key of the prefix.
type name struct {
	space driver.Space
	key   string
}

func nameOf(r *driver.Request) name { return name{r.Space, r.Key} }

// modes are the modes this driver keeps: driver.Modes, the matrix's, and
// Limited (driver.Limiter), which has holders and marks as they do.
var modes = [...]driver.Mode{driver.Exclusive, driver.Shared, driver.IntentShared, driver.IntentExclusive, driver.Limited}

// letter names the space in Redis keys.
func (n name) letter() string {
	if n.space == driver.Subtree {
		return "t"
	}
	return "l"
}

// digit is mode m as the scripts spell it.
func digit(m driver.Mode) string { return strconv.Itoa(int(m)) }

// anchor is n's hash: what exists while anything of n does.
func (d *redlock) anchor(n name) string { return d.cfg.prefix + n.letter() + ":" + n.key }

// holders is the sorted set of n's holders in mode m (never made for
// Exclusive, whose holder is in the anchor).
func (d *redlock) holders(n name, m driver.Mode) string {
	return d.cfg.prefix + n.letter() + digit(m) + ":" + n.key
}

// markExpiries is the sorted set of n's waiting marks by expiry.
func (d *redlock) markExpiries(n name) string { return d.cfg.prefix + n.letter() + "w:" + n.key }

// marks is the sorted set of n's waiting marks in mode m, by place.
func (d *redlock) marks(n name, m driver.Mode) string {
	return d.cfg.prefix + n.letter() + "q" + digit(m) + ":" + n.key
}

// allMarks lists n's marks by mode, in the order of the modes.
func (d *redlock) allMarks(n name) []string {
	ks := make([]string, len(modes))
	for i, m := range modes {
		ks[i] = d.marks(n, m)
	}
	return ks
}

// pendings is the hash of the holds that n's Exclusive marks wait to be
// handed: a release grants the first of them (handoff.go).
func (d *redlock) pendings(n name) string { return d.cfg.prefix + n.letter() + "p:" + n.key }

// records lists n's Redis keys as acquireScript takes them: the anchor,
// the holders by mode (Exclusive's are in the anchor), the marks by
// expiry, the marks by mode, the pending holds.
func (d *redlock) records(n name) []string {
	ks := make([]string, 0, recordKeys)
	ks = append(ks, d.anchor(n))
	for _, m := range modes[1:] {
		ks = append(ks, d.holders(n, m))
	}
	ks = append(ks, d.markExpiries(n))
	ks = append(ks, d.allMarks(n)...)
	return append(ks, d.pendings(n))
}

// recordKeys is how many Redis keys records returns.
const recordKeys = 2 + 2*len(modes)

func (d *redlock) counterKey() string { return d.cfg.prefix + "fence" }

// channelPrefix begins every release channel of the Locker.
func (d *redlock) channelPrefix() string { return d.cfg.prefix + "r" }

// channel is where n's releases are published.
func (d *redlock) channel(n name) string {
	if n.space == driver.Subtree {
		return d.channelPrefix() + "t:" + n.key
	}
	return d.channelPrefix() + ":" + n.key
}

// handPrefix begins the channel of every driver's hand-offs: not a
// release channel, so that only the driver named hears them.
func (d *redlock) handPrefix() string { return d.cfg.prefix + "h:" }

// handChannel is where masters tell this driver of a hand-off to one of
// its calls (handoff.go).
func (d *redlock) handChannel() string { return d.handPrefix() + d.id }

// nameOfChannel is the name whose channel is ch, if it is one.
func (d *redlock) nameOfChannel(ch string) (name, bool) {
	rest, ok := strings.CutPrefix(ch, d.channelPrefix())
	if !ok {
		return name{}, false
	}
	if k, ok := strings.CutPrefix(rest, ":"); ok {
		return name{driver.Plain, k}, true
	}
	if k, ok := strings.CutPrefix(rest, "t:"); ok {
		return name{driver.Subtree, k}, true
	}
	return name{}, false
}

// hubKey is what waiters of n in mode m wait on in the Locker: a release
// wakes the longest waiter of each mode, so that a waiter refused for its
// mode does not keep the wake from one of another mode it may admit.
func hubKey(n name, m driver.Mode) string { return digit(m) + n.letter() + ":" + n.key }
