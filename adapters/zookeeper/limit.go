package zookeeper

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// Semaphores (driver.Limiter). A Limited node's name carries its n after
// its mode's tag, "_c_<guid>-L<n>-lock-<seq>", so that one listing of the
// queue shows every node's mode and n (a client of an earlier version
// takes it for an exclusive node, and locks more, never less). It holds
// the key once every node before it is Limited of the same n and fewer
// than n precede it, holders and waiters alike: waiters are served in
// sequence order, and so are the fences, the nodes' czxids. Rule 2 is
// judged by the listing that follows the create, from the first node,
// which holds: a Limited node holds only behind Limited ones of its n,
// any other only behind no Limited one. A mismatched call deletes its
// node again; a call queued behind that node meanwhile waits for it to
// go, as for any node it may not hold behind.

// limitTag begins the tag of a Limited node, followed by its n.
const limitTag = "-L"

// KeepsLimits declares that Acquire grants Limited requests by the rule
// driver.Limiter states.
func (*zkDriver) KeepsLimits() {}

var _ driver.Limiter = (*zkDriver)(nil)

// class is what a lock node asks for: its mode and, if Limited, its n.
type class struct {
	mode  driver.Mode
	limit int
}

// classFor is the class request r asks for.
func classFor(r *driver.Request) class {
	if r.Mode != driver.Limited {
		return class{mode: r.Mode}
	}
	return class{driver.Limited, r.Limit}
}

// tag is the part of a node's name before lockInfix that says its class:
// modeTags', or limitTag and n.
func (c class) tag() string {
	if c.mode == driver.Limited {
		return limitTag + strconv.Itoa(c.limit)
	}
	return modeTags[c.mode]
}

// classOf is the class a lock node's name carries; a tag that is not ours
// is Exclusive's.
func classOf(name string) class {
	head := strings.TrimSuffix(name[:max(0, len(name)-seqDigits)], lockInfix)
	for m := len(modeTags) - 1; m > 0; m-- {
		if strings.HasSuffix(head, modeTags[m]) {
			return class{mode: driver.Mode(m)}
		}
	}
	if i := strings.LastIndex(head, limitTag); i >= 0 {
		digits := head[i+len(limitTag):]
		if n, err := strconv.Atoi(digits); err == nil && n > 1 && strconv.Itoa(n) == digits {
			return class{driver.Limited, n}
		}
	}
	return class{mode: driver.Exclusive}
}

// mismatch is rule 2 of driver.Limiter for request r, whose node is name
// among children (the listing made as it queued): judged by the first
// lock node, which holds, unless it is r's own. A Limited request behind
// a node of another mode or n, or another mode's behind a Limited node.
func mismatch(r *driver.Request, children []string, name string) error {
	first, lowest := "", int64(-1)
	for _, c := range children {
		if seq, ok := sequence(c); ok && (lowest < 0 || seq < lowest) {
			first, lowest = c, seq
		}
	}
	if first == "" || first == name {
		return nil
	}
	s, o := classFor(r), classOf(first)
	if err := driver.LimitConflict(r.Key, s.mode, o.mode, s.limit, o.limit); err != nil {
		return fmt.Errorf("%w: %w", locker.ErrModeMismatch, err)
	}
	return nil
}

// limitBlockers are the nodes before a Limited node of class c (before,
// by sequence) whose removal may let it hold: the last of another mode or
// n, if any (none holds behind it); else, with n or more before it, the
// last n. Any one of those n going may admit it (any holder may free a
// slot, so watching one alone would lose wakes), and one of them must go
// before it can hold: the nodes ahead of them, all gone, leave n before
// it. None if it holds.
func limitBlockers(before []string, c class) []string {
	for i := len(before) - 1; i >= 0; i-- {
		if classOf(before[i]) != c {
			return before[i : i+1]
		}
	}
	if len(before) < c.limit {
		return nil
	}
	return before[len(before)-c.limit:]
}
