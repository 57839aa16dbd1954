package zookeeper

import (
	"context"
	"fmt"
	"time"

	"github.com/locker-go/locker"
)

// dialer opens the sessions of a Locker from a URL without session_timeout.
type dialer struct {
	servers []string
	auth    string // user:pass for digest auth, or ""
	name    string // the URL without its password, for errors
}

// slot is a rung's session, opened once: ready closes once s or err is set.
type slot struct {
	ready chan struct{}
	s     *session
	err   error
}

// minRung is the shortest session timeout asked for: go-zookeeper derives
// its deadlines from it, and no server grants much less.
const minRung = time.Second / 8

// rung is the session timeout for ttl: the largest power of two seconds at
// most ttl, or minRung. The crash handoff then comes within the TTL, and
// the session is more than half of it: shorter ones cost more probes and
// tolerate pauses less.
func rung(ttl time.Duration) time.Duration {
	r := time.Second
	for r > ttl && r > minRung {
		r /= 2
	}
	for 2*r <= ttl {
		r *= 2
	}
	return r
}

// session returns the session for a lock with ttl, counted as one user of
// it until the caller puts it back.
func (z *zkDriver) session(ctx context.Context, ttl time.Duration) (*session, error) {
	for {
		s, err := z.open(ctx, ttl)
		if err != nil {
			return nil, err
		}
		z.mu.Lock()
		_, long := s.timeouts()
		closed := s.closed
		if !closed && ttl >= long {
			s.users++
		}
		z.mu.Unlock()
		switch {
		case closed: // retired as idle meanwhile: open it again
			continue
		case ttl >= long:
			return s, nil
		case z.dial == nil:
			return nil, pinnedTTLError(ttl, s)
		case long > s.asked: // the server raised it to its minimum
			return nil, minTTLError(ttl, long)
		}
		return nil, ttlError(ttl, long, "the shortest ZooKeeper session timeout this adapter uses", "lock with a longer TTL")
	}
}

// open returns ttl's session: the primary when pinned, else that of ttl's
// rung within the server's bounds, opened on first use.
func (z *zkDriver) open(ctx context.Context, ttl time.Duration) (*session, error) {
	if z.dial == nil {
		return z.primary, nil
	}
	z.mu.Lock()
	if z.minS > 0 && ttl < z.minS {
		z.mu.Unlock()
		return nil, minTTLError(ttl, z.minS)
	}
	r := rung(ttl)
	if z.maxS > 0 {
		r = min(r, z.maxS)
	}
	r = max(r, z.minS)
	sl := z.sessions[r]
	if sl == nil {
		sl = &slot{ready: make(chan struct{})}
		z.sessions[r] = sl
		go z.dialSession(r, sl)
	}
	z.mu.Unlock()
	select {
	case <-sl.ready:
		return sl.s, sl.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// dialSession opens rung r's session for sl, in the background, so that
// no one caller's context decides it for the others waiting.
func (z *zkDriver) dialSession(r time.Duration, sl *slot) {
	ctx, cancel := context.WithTimeout(z.ctx, max(r, openTimeout))
	defer cancel()
	s, err := connect(ctx, z.dial.servers, r, z.dial.auth)
	z.mu.Lock()
	defer z.mu.Unlock()
	defer close(sl.ready)
	switch {
	case z.ctx.Err() != nil:
		if s != nil {
			s.conn.Close()
		}
		sl.err = locker.ErrClosed
	case err != nil:
		sl.err = locker.Unavailable(fmt.Errorf("locker/zookeeper: no session with %s: %w", z.dial.name, err))
	default:
		z.register(sl, s)
		z.adopt(s)
		go z.monitor(s)
		return
	}
	if z.sessions[r] == sl {
		delete(z.sessions, r) // the next Lock tries again
	}
}

// register files s, sl's new session, under its granted timeout, and
// learns the server's bounds: it raises a timeout below minSessionTimeout
// to that, and lowers one above maxSessionTimeout. z.mu is held.
func (z *zkDriver) register(sl *slot, s *session) {
	sl.s = s
	n := time.Duration(s.negotiated.Load())
	switch {
	case n > s.asked:
		z.minS = n
	case n > 0 && n < s.asked:
		z.maxS = n
	}
	if n > 0 && n != s.asked && z.sessions[n] == nil {
		if z.sessions[s.asked] == sl {
			delete(z.sessions, s.asked)
		}
		s.key = n
	}
	z.sessions[s.key] = sl
}

// put counts one user of s less.
func (z *zkDriver) put(s *session) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.putLocked(s)
}

func (z *zkDriver) putLocked(s *session) {
	if s.users--; s.users == 0 {
		s.idleSince = time.Now()
	}
}

// retireIdle closes s unless it is the primary or has been used within
// the idle timeout; it reports whether it did.
func (z *zkDriver) retireIdle(s *session) bool {
	z.mu.Lock()
	if s == z.primary || s.closed || s.users > 0 || time.Since(s.idleSince) < z.cfg.idle {
		z.mu.Unlock()
		return false
	}
	s.closed = true
	if sl := z.sessions[s.key]; sl != nil && sl.s == s {
		delete(z.sessions, s.key)
	}
	z.mu.Unlock()
	close(s.quit)
	s.conn.Close()
	return true
}

// ttlError refuses ttl, below long, the session timeout that what names:
// the server keeps a crashed holder's key that long. fix says what to do.
func ttlError(ttl, long time.Duration, what, fix string) error {
	return fmt.Errorf("%w: TTL %v is below %s %v, for which the server keeps a crashed holder's key: %s",
		locker.ErrInvalidTTL, ttl, what, long, fix)
}

func minTTLError(ttl, minimum time.Duration) error {
	return ttlError(ttl, minimum, "the ZooKeeper server's minimum session timeout",
		fmt.Sprintf("lock with WithTTL(%v) or more, or lower the server's minSessionTimeout", minimum))
}

// pinnedTTLError refuses a TTL below the timeout of s, a pinned session.
func pinnedTTLError(ttl time.Duration, s *session) error {
	_, long := s.timeouts()
	fix := fmt.Sprintf("lock with WithTTL(%v) or more, or use a Locker whose session timeout is at most the TTL "+
		"(zk://host:port/root without session_timeout derives it from each TTL; or session_timeout=%v, "+
		"or New(conn, WithSessionTimeout(%v)) with conn from zk.Connect(servers, %v))", long, ttl, ttl, ttl)
	if long > s.asked {
		fix = fmt.Sprintf("the server raised the %v asked for to its minSessionTimeout; %s", s.asked, fix)
	}
	return ttlError(ttl, long, "this Locker's ZooKeeper session timeout", fix)
}
