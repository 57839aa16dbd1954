package locker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/locker-go/locker/driver"
)

// Campaign blocks until the caller leads the election name, or ctx ends
// (as Lock does). The lease is the leadership: its Fence is the term,
// strictly higher for every new leader; WithLabel is the value the leader
// advertises (its address, say), which Observe reports; Unlock resigns;
// Done closes when leadership is lost, no later than the Deadline.
// Election names are a namespace of their own, apart from plain keys and
// subtree paths. Shared and Subtree do not apply: ErrInvalidOption.
//
// Campaign is a Lock through l's own Lock method, so wrappers (otellocker,
// a Migration) pass it on; a Locker that is not this package's (New's)
// takes name as a plain key.
func Campaign(ctx context.Context, l Locker, name string, opts ...Option) (Lease, error) {
	return l.Lock(ctx, name, append(slices.Clip(opts), inElection)...)
}

// inElection marks a call as an election's: see Campaign.
func inElection(o *Options) { o.election = true }

// checkElection refuses the options that an election's lease cannot take,
// and a name too long for the node it becomes.
func checkElection(name string, o Options) error {
	switch {
	case !o.election:
		return nil
	case o.Shared || o.Subtree:
		return fmt.Errorf("%w: an election is exclusive and flat: no Shared or Subtree", ErrInvalidOption)
	case len(name) >= MaxKeyLen:
		return fmt.Errorf("%w: election name of %d bytes, over %d", ErrInvalidKey, len(name), MaxKeyLen-1)
	}
	return nil
}

// node is where a driver keeps key with options o (not a subtree lock's):
// a plain key, or an election's name as a Subtree-space key that ends in
// '/', which no subtree path may (driver.Election). Over a driver without
// modes, every key is in one space, so more is locked, never less.
func (p *portable) node(key string, o Options) (driver.Space, string) {
	switch {
	case !o.election:
		return driver.Plain, key
	case !p.modes:
		return driver.Plain, key + "/"
	}
	return driver.Subtree, key + "/"
}

// elected reports the key and space of info as the Locker shows them: an
// election's name in the Election space for its node.
func elected(info LockInfo) LockInfo {
	if info.Space == driver.Subtree && strings.HasSuffix(info.Key, "/") {
		info.Key, info.Space = strings.TrimSuffix(info.Key, "/"), driver.Election
	}
	return info
}

// announcing is an election lease's hold on a driver.Announcer: its
// release is announced to the name's watchers (Observe).
type announcing struct {
	driver.Hold
	a     driver.Announcer
	space driver.Space
	key   string
}

func (h announcing) Release(ctx context.Context) error {
	err := h.Hold.Release(ctx)
	if err == nil {
		_ = h.a.Announce(ctx, h.space, h.key) // a watcher missing it reads again at the expiry
	}
	return err
}

// announce tells the watchers of r's key that it has a new leader, and has
// the lease's release told too, where the driver does not by itself.
func (p *portable) announce(ctx context.Context, r *driver.Request, g granted) granted {
	a, ok := p.d.(driver.Announcer)
	if !ok {
		return g
	}
	_ = a.Announce(ctx, r.Space, r.Key) // best-effort, as above
	g.Hold = announcing{Hold: g.Hold, a: a, space: r.Space, key: r.Key}
	return g
}
