package driver

import (
	"log/slog"
	"sync/atomic"
)

// Logged is implemented by drivers that log their rare events: those no
// call's result shows, such as a connection or session lost and restored,
// a subscription made again, a server marked down or up. The Locker hands
// its logger (locker.WithLogger) to SetLogger, possibly after the driver's
// own goroutines have started: embed Log, which keeps it safely for them.
// Levels: Warn for what may end leases (a session expired, a server
// down), Info for the rest (a reconnect).
type Logged interface {
	SetLogger(l *slog.Logger)
}

// Log implements Logged, to embed in a driver: Info and Warn log to the
// logger set last, or nowhere before SetLogger (a Locker is silent by
// default).
type Log struct{ l atomic.Pointer[slog.Logger] }

// SetLogger has the driver log to l from now on; nil silences it.
func (g *Log) SetLogger(l *slog.Logger) { g.l.Store(l) }

// Info logs msg at Info level with args (slog's key-value pairs).
func (g *Log) Info(msg string, args ...any) {
	if l := g.l.Load(); l != nil {
		l.Info(msg, args...)
	}
}

// Warn logs msg at Warn level with args (slog's key-value pairs).
func (g *Log) Warn(msg string, args ...any) {
	if l := g.l.Load(); l != nil {
		l.Warn(msg, args...)
	}
}
