package zookeeper

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
)

// Nodes no lock stands behind (a cancelled or failed Lock's, a lost
// hold's) are orphans: they are deleted in the background, retried with
// backoff over disconnects and server restarts for as long as their
// session may keep them, since one left behind would reach the head of its
// queue and block the key with no lease behind it.

// orphan deletes path, a node of session, in the background, and returns
// a channel closed when that is done or moot.
func (z *Locker) orphan(path string, session int64) <-chan struct{} {
	return z.track(path, func() { z.reap(path, session) })
}

// abandon deletes the node a create under way may make, once its result
// (res) comes: a cancelled Lock no longer waits for it.
func (z *Locker) abandon(parent, prefix string, session int64, res <-chan createResult) <-chan struct{} {
	return z.track(parent+"/"+prefix, func() {
		r := <-res
		switch {
		case r.err == nil:
			z.reap(r.path, z.conn.SessionID())
		case errors.Is(r.err, zk.ErrConnectionClosed): // it may have been made
			z.reapLost(parent, prefix, session)
		}
	})
}

// lostCreate deletes the node a create may have made before its reply was
// lost, found by the GUID in its name.
func (z *Locker) lostCreate(parent, prefix string, session int64) <-chan struct{} {
	return z.track(parent+"/"+prefix, func() { z.reapLost(parent, prefix, session) })
}

// track runs cleanup in the background, recorded for Close.
func (z *Locker) track(name string, cleanup func()) <-chan struct{} {
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
func (z *Locker) reap(path string, session int64) {
	z.retry(session, func() error {
		err := z.conn.Delete(path, -1)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
	})
}

// reapLost finds and deletes the node named with prefix, if there is one.
func (z *Locker) reapLost(parent, prefix string, session int64) {
	var path string
	z.retry(session, func() (err error) {
		path, err = z.find(parent, prefix)
		return err
	})
	if path != "" {
		z.reap(path, session)
	}
}

// retry runs op until it succeeds or fails for good: with backoff while
// the failure is the connection's and session is still the connection's.
func (z *Locker) retry(session int64, op func() error) {
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err := op()
		if !retryable(err) || z.conn.SessionID() != session {
			return
		}
		select {
		case <-z.quit:
			return
		case <-time.After(wait):
		}
	}
}

// retryable reports a failure of the connection after which the session,
// and the nodes it keeps, may still be alive.
func retryable(err error) bool {
	return connErr(err) && !errors.Is(err, zk.ErrSessionExpired) && !errors.Is(err, zk.ErrClosing)
}

// awaitOrphans waits until the background deletes are done, or ctx ends.
func (z *Locker) awaitOrphans(ctx context.Context) {
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
