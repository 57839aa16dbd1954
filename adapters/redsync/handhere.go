package redsync

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// A hand-off's copy reaches its waiter's driver by the message each
// master publishes on the driver's hand channel, a trip through the
// master and the driver's subscription that comes well after the
// script's reply. Where the waiter's driver is in the releasing process
// and names the same masters in the same order (so that a master's index
// means the same master to both), the releaser gives it each master's
// copy from that master's reply instead (handHere); news counts each
// master's copy of a release once, so the message that follows adds
// nothing.

// drivers are this process's drivers, by id.
var drivers sync.Map

// mastersOf names clients, in order, for handHere: a client's address and
// database where it tells them, else the client itself.
func mastersOf(clients []*master) string {
	var b strings.Builder
	for _, m := range clients {
		if o, ok := m.client.(interface{ Options() *goredis.Options }); ok {
			fmt.Fprintf(&b, "%s/%d,", o.Options().Addr, o.Options().DB)
		} else {
			fmt.Fprintf(&b, "%p,", m.client)
		}
	}
	return b.String()
}

// released reads master i's reply to releaseScript: its figures, and a
// hand-off's copy ({2, driver id, message}), handed here.
func (d *redlock) released(v []any, i int) ([]int64, error) {
	out := make([]int64, 0, len(v))
	for _, x := range v {
		if n, ok := x.(int64); ok {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("empty script reply")
	}
	if len(v) == 3 {
		to, _ := v[1].(string)
		msg, _ := v[2].(string)
		d.handHere(to, msg, i)
	}
	return out, nil
}

// handHere gives master i's copy of a hand-off, msg, to the driver to
// if it is in this process and names the same masters.
func (d *redlock) handHere(to, msg string, i int) {
	v, ok := drivers.Load(to)
	if !ok {
		return
	}
	w := v.(*redlock)
	if w.mastersID != d.mastersID {
		return
	}
	channel, payload := handNews(msg)
	if n, ok := w.nameOfChannel(channel); ok {
		w.watches.signal(n)
		w.heard(n, payload, i)
		runtime.Gosched() // a woken waiter only counts copies: let it run
	}
}
