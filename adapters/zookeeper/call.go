package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locker-go/locker"
)

// call runs fn, a go-zookeeper call (they take no context), and returns its
// result, or ctx's error as soon as ctx ends. The call itself then finishes
// in the background; callers that created something clean it up.
func call[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// ask is call for a request on s: any answer from the server, even an
// error such as ErrNoNode, shows the session alive when it was sent.
func ask[T any](ctx context.Context, s *session, fn func() (T, error)) (T, error) {
	sent := time.Now()
	return call(ctx, func() (T, error) {
		v, err := fn()
		if !connErr(err) {
			s.contact(sent)
		}
		return v, err
	})
}

// sync has s's server catch up with the leader as of now, so that a read
// after it sees every write committed before it, through any session
// (ZooKeeper's reads are served by the session's server, which may lag).
func (s *session) sync(ctx context.Context, path string) error {
	_, err := ask(ctx, s, func() (string, error) { return s.conn.Sync(path) })
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

// children lists path's children.
func (s *session) children(ctx context.Context, path string) ([]string, error) {
	return ask(ctx, s, func() ([]string, error) {
		c, _, err := s.conn.Children(path)
		return c, err
	})
}

// backendErr wraps a failed call: connection and session failures match
// locker.ErrUnavailable; ctx errors pass through.
func backendErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, locker.ErrUnavailable):
		return err
	case connErr(err):
		return locker.Unavailable(fmt.Errorf("locker/zookeeper: %s: %w", op, err))
	}
	return fmt.Errorf("locker/zookeeper: %s: %w", op, err)
}

// connErr reports a failure of the connection or session, not an answer
// from the server about the request.
func connErr(err error) bool {
	var netErr net.Error
	return errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrConnectionClosed) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing) ||
		errors.Is(err, zk.ErrSessionMoved) || errors.As(err, &netErr)
}
