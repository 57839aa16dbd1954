package zookeeper

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// session is one ZooKeeper session of a Locker.
type session struct {
	conn        *zk.Conn
	asked       time.Duration
	negotiated  atomic.Int64  // nanoseconds; 0 while unknown (New)
	lastContact atomic.Int64  // when the last answered request was sent: nanoseconds since epoch, monotonic
	own         bool          // the Locker made the connection and closes it
	quit        chan struct{} // closed when the Locker is done with the session
	// callback: the connection hands its events to event, which passes
	// them to dispatch once the driver adopts the session (dispatch.go).
	callback bool
	dispatch atomic.Pointer[func(zk.Event)]
	dropped  atomic.Bool // its connection was lost, not yet made again

	// guarded by zkDriver.mu
	key       time.Duration // its entry in zkDriver.sessions
	users     int           // acquires in flight and holds on this session
	idleSince time.Time     // when users last fell to 0
	closed    bool
	watched   map[string]*hold // holds by node path, where callback
	recent    recent           // events of nodes not registered, where callback
}

func newSession(conn *zk.Conn, asked time.Duration, own bool) *session {
	s := &session{conn: conn, asked: asked, own: own, quit: make(chan struct{}), key: asked, idleSince: time.Now()}
	s.contact(time.Now()) // a new session was just answered
	return s
}

// connect opens a session with timeout asked to servers, authenticated
// with auth (user:pass, digest) unless empty, and waits until it exists
// and the server's granted timeout is known, or ctx ends.
func connect(ctx context.Context, servers []string, asked time.Duration, auth string) (*session, error) {
	s := newSession(nil, asked, true)
	s.callback, s.watched = true, map[string]*hold{}
	logger := &sessionLogger{negotiated: &s.negotiated, learned: make(chan struct{})}
	conn, events, err := zk.Connect(servers, asked, zk.WithLogger(logger), zk.WithLogInfo(true), zk.WithEventCallback(s.event))
	if err != nil {
		return nil, err
	}
	s.conn = conn
	if err := awaitSession(ctx, events, logger.learned); err != nil {
		conn.Close()
		return nil, err
	}
	if auth != "" {
		if _, err := call(ctx, func() (struct{}, error) { return struct{}{}, conn.AddAuth("digest", []byte(auth)) }); err != nil {
			conn.Close()
			return nil, &authError{err}
		}
	}
	s.contact(time.Now())
	return s, nil
}

// authError is a failed digest authentication of a new session.
type authError struct{ err error }

func (e *authError) Error() string { return "digest auth: " + e.err.Error() }
func (e *authError) Unwrap() error { return e.err }

// awaitSession waits for go-zookeeper to report a session, then for the
// log line that tells its granted timeout.
func awaitSession(ctx context.Context, events <-chan zk.Event, learned <-chan struct{}) error {
	for {
		select {
		case ev, ok := <-events:
			switch {
			case !ok:
				return zk.ErrClosing
			case ev.State == zk.StateHasSession:
				select {
				case <-learned:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			case ev.State == zk.StateAuthFailed:
				return zk.ErrAuthFailed
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// timeouts are the bounds on the session timeout S: short for how long a
// silent session may live (loss, validity), long for how long a crashed
// holder keeps its keys (the TTL rule). They differ while the granted
// value is unknown (New) or differs from the one asked for.
func (s *session) timeouts() (short, long time.Duration) {
	if n := time.Duration(s.negotiated.Load()); n > 0 {
		return min(s.asked, n), max(s.asked, n)
	}
	return s.asked, s.asked
}

// contact records that a request sent at t was answered: the server heard
// from the session at t or later, so it cannot expire it before t+S.
func (s *session) contact(t time.Time) {
	at := int64(t.Sub(epoch))
	for {
		old := s.lastContact.Load()
		if at <= old || s.lastContact.CompareAndSwap(old, at) {
			return
		}
	}
}

// sinceContact is how long ago the last answered request was sent.
func (s *session) sinceContact() time.Duration {
	return time.Since(epoch) - time.Duration(s.lastContact.Load())
}

// epoch anchors lastContact on the monotonic clock: on the wall clock
// (UnixNano), a step back of the clock made a silent session look heard
// from, and its holds' validity outlast the server's expiry of it.
var epoch = time.Now()

// monitor probes s every S/12 and ends its holds as lost once S/3 has
// passed since the last answered request was sent: well before the server
// may expire the session, however the connection failed (go-zookeeper
// notices silence only after 2S/3). It also retires s when idle.
func (z *zkDriver) monitor(s *session) {
	short, _ := s.timeouts()
	tick := time.NewTicker(max(short/12, 10*time.Millisecond))
	defer tick.Stop()
	var probing atomic.Bool
	for {
		select {
		case <-z.ctx.Done():
			return
		case <-s.quit:
			return
		case <-tick.C:
		}
		if z.retireIdle(s) {
			return
		}
		if probing.CompareAndSwap(false, true) {
			go func() {
				defer probing.Store(false)
				sent := time.Now()
				if _, _, err := s.conn.Exists("/"); !connErr(err) {
					s.contact(sent)
				}
			}()
		}
		short, _ = s.timeouts()
		if s.sinceContact() < short/3 {
			continue
		}
		z.mu.Lock()
		var holds []*hold
		for h := range z.holds {
			if h.s == s {
				holds = append(holds, h)
			}
		}
		z.mu.Unlock()
		if len(holds) > 0 {
			z.Warn("locker/zookeeper: no answer within a third of the session timeout; its locks are given up as lost",
				"locks", len(holds), "silent", s.sinceContact().Round(time.Millisecond))
		}
		for _, h := range holds {
			z.lose(h, true)
		}
	}
}

// sessionLogger is go-zookeeper's logger for connections the Locker
// makes: it drops the log but keeps the session timeout the server
// granted, which go-zookeeper reports only there.
type sessionLogger struct {
	negotiated *atomic.Int64
	learned    chan struct{} // closed once the timeout is known
}

func (l *sessionLogger) Printf(format string, args ...any) {
	if format != "authenticated: id=%d, timeout=%d" || len(args) != 2 {
		return
	}
	if ms, ok := args[1].(int32); ok && ms > 0 && l.negotiated.Swap(int64(time.Duration(ms)*time.Millisecond)) == 0 {
		close(l.learned)
	}
}

// existsW is conn.ExistsW that leaves no watch behind where the node does
// not exist: ZooKeeper keeps an exists-watch on a missing node until a node
// of that path is made, which for a sequential node's name is never, so
// each (a waiter's predecessor gone between its listing and its watch:
// one hand-off in a few hundred) cost a watch on the server and a channel
// in go-zookeeper for the session's life. A read with a watch sets none on
// a missing node, as Curator's lock reads its predecessor for the same
// reason; on one that exists it is the same watch (its deletion or a
// write), and the nodes it reads are lock nodes with an owner's name.
func (s *session) existsW(path string) (bool, *zk.Stat, <-chan zk.Event, error) {
	_, st, ch, err := s.conn.GetW(path)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return false, &zk.Stat{}, nil, nil
	case err != nil:
		return false, nil, nil, err
	}
	return true, st, ch, nil
}
