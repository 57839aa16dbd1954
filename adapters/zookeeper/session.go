package zookeeper

import (
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// sessionTimeouts are the bounds on the session timeout S the Locker
// reasons with: short for how long a silent session may live (loss,
// validity), long for how long a crashed holder keeps its keys (the TTL
// rule). They differ only while the server's negotiated value is unknown
// or differs from the one asked for.
func (z *Locker) sessionTimeouts() (short, long time.Duration) {
	s := z.cfg.sessionTimeout
	if n := time.Duration(z.negotiated.Load()); n > 0 {
		return min(s, n), max(s, n)
	}
	return s, s
}

// contact records that a request sent at t was answered: the server heard
// from the session at t or later, so it cannot expire it before t+S.
func (z *Locker) contact(t time.Time) {
	for {
		old := z.lastContact.Load()
		if t.UnixNano() <= old || z.lastContact.CompareAndSwap(old, t.UnixNano()) {
			return
		}
	}
}

// sinceContact is how long ago the last answered request was sent.
func (z *Locker) sinceContact() time.Duration {
	return time.Since(time.Unix(0, z.lastContact.Load()))
}

// answered reports whether err came from the server (nil, ErrNoNode...)
// rather than from a connection without a session.
func answered(err error) bool { return err == nil || !connErr(err) }

// monitor probes the session every S/12 and ends every hold as lost once
// S/3 has passed since the last answered request was sent. The server
// expires a session S after it last heard from it, so the leases end
// well before another client can be given their keys, however the
// connection failed (a closed socket, or silence, which go-zookeeper
// notices only after 2S/3); until then a disconnect is only a disconnect,
// and go-zookeeper reconnects to the same session.
func (z *Locker) monitor() {
	short, _ := z.sessionTimeouts()
	tick := time.NewTicker(max(short/12, 10*time.Millisecond))
	defer tick.Stop()
	var probing atomic.Bool
	for {
		select {
		case <-z.quit:
			return
		case <-tick.C:
		}
		if probing.CompareAndSwap(false, true) {
			go func() {
				defer probing.Store(false)
				sent := time.Now()
				if _, _, err := z.conn.Exists("/"); answered(err) {
					z.contact(sent)
				}
			}()
		}
		short, _ = z.sessionTimeouts()
		if z.sinceContact() < short/3 {
			continue
		}
		z.mu.Lock()
		holds := make([]*hold, 0, len(z.holds))
		for _, h := range z.holds {
			holds = append(holds, h)
		}
		z.mu.Unlock()
		for _, h := range holds {
			z.lose(h, true)
		}
	}
}

// sessionLogger is go-zookeeper's logger for connections Open makes: it
// drops the log but keeps the session timeout the server negotiated,
// which go-zookeeper reports only there.
type sessionLogger struct{ negotiated *atomic.Int64 }

func (l sessionLogger) Printf(format string, args ...any) {
	if format == "authenticated: id=%d, timeout=%d" && len(args) == 2 {
		if ms, ok := args[1].(int32); ok && ms > 0 {
			l.negotiated.Store(int64(time.Duration(ms) * time.Millisecond))
		}
	}
}

var _ zk.Logger = sessionLogger{}
