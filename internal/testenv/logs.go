package testenv

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// Logs is a slog.Handler that keeps every record, for a test to wait on.
type Logs struct {
	mu      sync.Mutex
	records []slog.Record
	added   chan struct{} // closed and replaced at each record
}

// NewLogs returns a logger whose records go to the Logs returned.
func NewLogs() (*slog.Logger, *Logs) {
	g := &Logs{added: make(chan struct{})}
	return slog.New(g), g
}

func (g *Logs) Enabled(context.Context, slog.Level) bool { return true }
func (g *Logs) WithAttrs([]slog.Attr) slog.Handler       { return g }
func (g *Logs) WithGroup(string) slog.Handler            { return g }
func (g *Logs) Handle(_ context.Context, r slog.Record) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.records = append(g.records, r.Clone())
	close(g.added)
	g.added = make(chan struct{})
	return nil
}

// Wait returns the first record at level whose message contains text,
// waiting for it until within has passed, when it fails t and lists the
// records it saw.
func (g *Logs) Wait(t testing.TB, within time.Duration, level slog.Level, text string) slog.Record {
	t.Helper()
	timeout := time.After(within)
	for {
		g.mu.Lock()
		for _, r := range g.records {
			if r.Level == level && strings.Contains(r.Message, text) {
				g.mu.Unlock()
				return r
			}
		}
		added := g.added
		g.mu.Unlock()
		select {
		case <-added:
		case <-timeout:
			t.Fatalf("no %v record %q logged within %v; logged: %s", level, text, within, g)
		}
	}
}

// String lists the records kept, a line each.
func (g *Logs) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var b strings.Builder
	for _, r := range g.records {
		b.WriteString("\n\t" + r.Level.String() + " " + r.Message)
		r.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.String())
			return true
		})
	}
	return b.String()
}

// Count returns how many records kept are at level and contain text.
func (g *Logs) Count(level slog.Level, text string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, r := range g.records {
		if r.Level == level && strings.Contains(r.Message, text) {
			n++
		}
	}
	return n
}
