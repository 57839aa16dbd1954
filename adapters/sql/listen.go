package sql

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/wait"
)

// listener is a driver's one dedicated Postgres connection LISTENing on
// the table's channel; it feeds every notification (payload: the token of
// the waiter whose turn it is) to the hub. It is a wait.Channel whose
// per-waiter subscription needs only the channel's LISTEN to be live.
type listener struct {
	cfg     *pgx.ConnConfig
	channel string
	hub     *wait.Hub

	ctx    context.Context // ends at close
	cancel context.CancelFunc
	start  sync.Once
	done   chan struct{}

	mu  sync.Mutex
	up  chan struct{} // closed while listening
	err error         // why the last connection attempt or connection failed
}

func newListener(cfg *pgx.ConnConfig, channel string) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{cfg: cfg, channel: channel, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), up: make(chan struct{})}
}

// Subscribe starts the listener on first use and returns once the channel
// is LISTENed to: a release committed after that reaches the hub.
func (ls *listener) Subscribe(ctx context.Context, _ string) error {
	ls.start.Do(func() { go ls.run() })
	ls.mu.Lock()
	up := ls.up
	ls.mu.Unlock()
	select {
	case <-up:
		return nil
	case <-ls.ctx.Done():
		return locker.ErrClosed
	case <-ctx.Done():
		ls.mu.Lock()
		defer ls.mu.Unlock()
		if ls.err != nil {
			return fmt.Errorf("%w: LISTEN: %w", ctx.Err(), locker.Unavailable(ls.err))
		}
		return ctx.Err()
	}
}

// Unsubscribe does nothing: the channel carries every key.
func (ls *listener) Unsubscribe(string) {}

// run keeps one LISTEN connection up until close, reconnecting with backoff.
func (ls *listener) run() {
	defer close(ls.done)
	for backoff := 10 * time.Millisecond; ls.ctx.Err() == nil; backoff = min(2*backoff, time.Second) {
		err := ls.listen()
		ls.mu.Lock()
		ls.err = err
		select {
		case <-ls.up: // it was up: mark it down
			ls.up = make(chan struct{})
			backoff = 10 * time.Millisecond
		default:
		}
		ls.mu.Unlock()
		select {
		case <-time.After(backoff):
		case <-ls.ctx.Done():
		}
	}
}

// listen connects, LISTENs, and delivers notifications until the
// connection fails or the listener closes.
func (ls *listener) listen() error {
	ctx, cancel := context.WithTimeout(ls.ctx, 10*time.Second)
	cfg := ls.cfg.Copy()
	// A config taken from a pooled connection carries that connection's
	// notification buffer: let pgx set up this connection's own.
	cfg.OnNotification = nil
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = conn.Close(ctx)
		}()
		_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{ls.channel}.Sanitize())
	}
	cancel()
	if err != nil {
		return err
	}
	ls.mu.Lock()
	close(ls.up)
	ls.mu.Unlock()
	// Releases while no connection listened were not heard: every waiter
	// tries again.
	ls.hub.NotifyAll()
	for {
		n, err := conn.WaitForNotification(ls.ctx)
		if err != nil {
			return err
		}
		ls.hub.Notify(n.Payload)
	}
}

// close stops the listener and waits for it (idempotent).
func (ls *listener) close() {
	ls.cancel()
	ls.start.Do(func() { close(ls.done) }) // never started
	<-ls.done
}
