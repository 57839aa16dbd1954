package zookeeper

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker/internal/backoff"
)

// Nodes no lock stands behind (a cancelled or failed Lock's, a lost
// hold's) are orphans: they are deleted in the background, retried with
// backoff over disconnects and server restarts for as long as their
// session may keep them, since one left behind would reach the head of its
// queue and block the key with no lease behind it.

// orphan deletes path, a node of session sid on s, in the background, and returns
// a channel closed when that is done or moot.
func (z *zkDriver) orphan(s *session, path string, sid int64) <-chan struct{} {
	return z.track(path, func() { z.reap(s, path, sid) })
}

// abandon deletes the node a create under way may make, once its result
// (res) comes: a cancelled Lock no longer waits for it.
func (z *zkDriver) abandon(s *session, parent, prefix string, sid int64, res <-chan createResult) <-chan struct{} {
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

// lostCreate deletes the node a create may have made before its reply was
// lost, found by the GUID in its name.
func (z *zkDriver) lostCreate(s *session, parent, prefix string, sid int64) <-chan struct{} {
	return z.track(parent+"/"+prefix, func() { z.reapLost(s, parent, prefix, sid) })
}

// track runs cleanup in the background, recorded for Close.
func (z *zkDriver) track(name string, cleanup func()) <-chan struct{} {
	done := make(chan struct{})
	z.mu.Lock()
	z.orphans[name] = done
	z.mu.Unlock()
	go func() {
		defer func() {
			z.mu.Lock()
			if z.orphans[name] == done {
				delete(z.orphans, name)
			}
			z.mu.Unlock()
			close(done)
		}()
		cleanup()
	}()
	return done
}

// reap deletes path until it is gone, its session is (expired, or closed
// with the connection: the server then drops the node), or the Locker is
// closed.
func (z *zkDriver) reap(s *session, path string, sid int64) {
	z.retry(s, sid, func() error {
		err := s.conn.Delete(path, -1)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
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
// the failure is the connection's and sid is still s's session, until the
// Locker or the session is closed (the server then drops its nodes).
func (z *zkDriver) retry(s *session, sid int64, op func() error) {
	ctx, cancel := backoff.Until(context.Background(), z.quit, s.quit)
	defer cancel()
	backoff.Retry(ctx, backoff.Policy{Min: 20 * time.Millisecond, Max: time.Second}, func(context.Context) bool {
		return !retryable(op()) || s.conn.SessionID() != sid
	})
}

// retryable reports a failure of the connection after which the session,
// and the nodes it keeps, may still be alive.
func retryable(err error) bool {
	return connErr(err) && !errors.Is(err, zk.ErrSessionExpired) && !errors.Is(err, zk.ErrClosing)
}

// awaitOrphans waits until the background deletes are done, or ctx ends.
func (z *zkDriver) awaitOrphans(ctx context.Context) {
	for {
		z.mu.Lock()
		var done chan struct{}
		for _, ch := range z.orphans {
			done = ch
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
// returns promptly even when the server does not answer, and the cleanup
// goes on in the background.
func bounded(done <-chan struct{}) {
	t := time.NewTimer(cleanupTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
