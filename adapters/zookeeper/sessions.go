package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locker-go/locker"
)

// dialer is how a Locker from a URL without session_timeout opens the
// sessions its TTLs need.
type dialer struct {
	servers []string
	auth    string // user:pass for digest auth, or ""
	name    string // the URL without its password, for errors
}

// slot is the Locker's entry for the session of one rung, opened once.
type slot struct {
	ready chan struct{} // closed once s or err is set
	s     *session
	err   error
}

// minRung is the shortest session timeout asked for: go-zookeeper derives
// its connect and read deadlines from it, and no server grants much less.
const minRung = time.Second / 8

// rung is the session timeout the ladder gives a TTL: the largest power of
// two seconds (1/8s, 1/4s, 1/2s, 1s, 2s, 4s, 8s, …) at most ttl, or
// minRung. The server's
// crash handoff then comes within the TTL, the session is at least half
// the TTL (no needlessly short sessions, which would mean more probes and
// less tolerance of pauses), and a Locker keeps at most one session per
// power of two between the server's bounds.
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
// it until the caller puts it back. A pinned Locker (New, or a URL with
// session_timeout) has one session, whose timeout must be at most ttl;
// otherwise it is the rung's, within the server's bounds, opened on first
// use and shared by every lock whose TTL maps to it.
func (z *zkDriver) session(ctx context.Context, ttl time.Duration) (*session, error) {
	if z.dial == nil {
		s := z.primary
		if _, long := s.timeouts(); ttl < long {
			return nil, z.ttlError(ttl, s)
		}
		z.use(s)
		return s, nil
	}
	for {
		z.mu.Lock()
		if z.minS > 0 && ttl < z.minS {
			z.mu.Unlock()
			return nil, minTTLError(ttl, z.minS)
		}
		r := rung(ttl)
		if z.maxS > 0 {
			r = min(r, z.maxS)
		}
		if z.minS > 0 {
			r = max(r, z.minS)
		}
		sl := z.sessions[r]
		if sl == nil {
			sl = &slot{ready: make(chan struct{})}
			z.sessions[r] = sl
			go z.dialSession(r, sl)
		}
		z.mu.Unlock()
		select {
		case <-sl.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if sl.err != nil {
			return nil, sl.err
		}
		z.mu.Lock()
		s := sl.s
		if s.closed { // retired as idle meanwhile: open it again
			z.mu.Unlock()
			continue
		}
		if _, long := s.timeouts(); ttl < long {
			z.mu.Unlock()
			if long > s.asked { // the server raised it to its minimum
				return nil, minTTLError(ttl, long)
			}
			return nil, fmt.Errorf("%w: TTL %v is below %v, the shortest ZooKeeper session timeout this adapter uses, "+
				"for which the server keeps a crashed holder's key", locker.ErrInvalidTTL, ttl, long)
		}
		s.users++
		z.mu.Unlock()
		return s, nil
	}
}

// dialSession connects the session of rung r for sl, in the background,
// so that no one caller's context decides it for the others waiting.
func (z *zkDriver) dialSession(r time.Duration, sl *slot) {
	ctx, cancel := context.WithTimeout(z.dialCtx, max(r, openTimeout))
	defer cancel()
	s, err := connect(ctx, z.dial.servers, r, z.dial.auth)
	z.mu.Lock()
	defer z.mu.Unlock()
	if err == nil && z.closed {
		s.conn.Close()
		err = locker.ErrClosed
	}
	if err != nil {
		if z.sessions[r] == sl {
			delete(z.sessions, r) // the next Lock tries again
		}
		sl.err = locker.Unavailable(fmt.Errorf("locker/zookeeper: no session with %s: %w", z.dial.name, err))
		if errors.Is(err, locker.ErrClosed) {
			sl.err = locker.ErrClosed
		}
		close(sl.ready)
		return
	}
	z.register(sl, s)
	close(sl.ready)
	go z.monitor(s)
}

// register files the new session s of sl under its granted timeout and
// learns the server's bounds from it: a server raises a timeout below its
// minSessionTimeout to that minimum, and lowers one above its
// maxSessionTimeout to that maximum. z.mu is held.
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

// use counts one more user of s.
func (z *zkDriver) use(s *session) {
	z.mu.Lock()
	s.users++
	z.mu.Unlock()
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

// retireIdle closes s if it is not the primary session and has had no
// lock, waiter or hold for the idle timeout; it reports whether it did.
// The server then drops any node of the session left to delete.
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

// minTTLError explains a TTL below the server's minimum session timeout.
func minTTLError(ttl, minimum time.Duration) error {
	return fmt.Errorf("%w: TTL %v is below the ZooKeeper server's minimum session timeout %v (minSessionTimeout), "+
		"for which it keeps a crashed holder's key: lock with WithTTL(%v) or more, or lower the server's minSessionTimeout",
		locker.ErrInvalidTTL, ttl, minimum, minimum)
}
