package zookeeper

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker/internal/backoff"
)

// A node no lock stands behind (a cancelled Lock's, a lost hold's) would
// reach the head of its queue and block the key: such orphans are deleted
// in the background, for as long as their session may keep them.

// orphan deletes path, a node of session sid on s; the channel closes when
// that is done or moot.
func (z *zkDriver) orphan(s *session, path string, sid int64) <-chan struct{} {
	return z.track(path, func() { z.reap(s, path, sid) })
}

// abandon deletes the node that a create under way (res) may make, named
// with prefix under parent.
func (z *zkDriver) abandon(s *session, parent, prefix string, sid int64, res <-chan made) <-chan struct{} {
	return z.track(parent+"/"+prefix, func() {
		r := <-res
		switch {
		case r.err == nil:
			z.reap(s, r.path, s.conn.SessionID())
		case errors.Is(r.err, zk.ErrConnectionClosed): // it may have been made
			z.reapLost(s, parent, prefix, sid)
		}
	})
}

// track runs cleanup in the background, recorded for Close.
func (z *zkDriver) track(name string, cleanup func()) <-chan struct{} {
	done := make(chan struct{})
	z.mu.Lock()
	z.orphans[name] = done
	z.mu.Unlock()
	go func() {
		cleanup()
		z.mu.Lock()
		if z.orphans[name] == done {
			delete(z.orphans, name)
		}
		z.mu.Unlock()
		close(done)
	}()
	return done
}

// reap deletes path until it is gone or its session is.
func (z *zkDriver) reap(s *session, path string, sid int64) {
	z.retry(s, sid, func() error {
		if err := s.conn.Delete(path, -1); !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		return nil
	})
}

// reapLost finds and deletes the node named with prefix, if there is one.
func (z *zkDriver) reapLost(s *session, parent, prefix string, sid int64) {
	var path string
	z.retry(s, sid, func() (err error) {
		path, err = s.find(parent, prefix)
		return err
	})
	if path != "" {
		z.reap(s, path, sid)
	}
}

// retry runs op until it succeeds or fails for good: with backoff while
// the connection fails and sid is still s's session, until the Locker or
// the session is closed (the server then drops its nodes).
func (z *zkDriver) retry(s *session, sid int64, op func() error) {
	ctx, cancel := backoff.Until(z.ctx, s.quit)
	defer cancel()
	backoff.Retry(ctx, backoff.Policy{Min: 20 * time.Millisecond, Max: time.Second}, func(context.Context) bool {
		err := op()
		return !connErr(err) || errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing) ||
			s.conn.SessionID() != sid
	})
}

// awaitOrphans waits until the background deletes are done, or ctx ends.
func (z *zkDriver) awaitOrphans(ctx context.Context) {
	for {
		var done chan struct{}
		z.mu.Lock()
		for _, done = range z.orphans {
			break
		}
		z.mu.Unlock()
		if done == nil {
			return
		}
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
}

// bounded waits for a cleanup at most cleanupTimeout: a cancelled Lock
// returns promptly when the server does not answer.
func bounded(done <-chan struct{}) {
	select {
	case <-done:
	case <-time.After(cleanupTimeout):
	}
}
