package locker

import (
	"context"
	"log/slog"

	"github.com/locker-go/locker/driver"
)

// ClientOption configures the Locker that Open or New makes (see
// WithLogger); adapters' constructors take it as an option of theirs.
type ClientOption func(*clientOptions)

type clientOptions struct {
	logger *slog.Logger
}

// WithLogger makes the Locker log its rare events to l: a lease lost (at
// Warn: the key, its fence and why), a renewal that failed and will be
// retried before the lease's deadline (at Info), and its driver's own
// (driver.Logged): a connection, session or subscription lost and made
// again, a server down or back. Without it a Locker logs nothing.
func WithLogger(l *slog.Logger) ClientOption { return func(o *clientOptions) { o.logger = l } }

// clientOptionsKey carries Open's options to the Opens an opener makes
// itself (a migrate: URL opens its two sides), whose opener signature has
// no room for them.
type clientOptionsKey struct{}

// withClientOptions returns ctx carrying opts after those it carries.
func withClientOptions(ctx context.Context, opts []ClientOption) (context.Context, *clientOptions) {
	var o clientOptions
	if outer, ok := ctx.Value(clientOptionsKey{}).([]ClientOption); ok {
		opts = append(append([]ClientOption(nil), outer...), opts...)
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return context.WithValue(ctx, clientOptionsKey{}, opts), &o
}

// configurable is a Locker Open can apply its options to: the portable
// one (New's).
type configurable interface{ configure(*clientOptions) }

func (p *portable) configure(o *clientOptions) {
	if o.logger != nil {
		p.set.log = o.logger
		if lg, ok := p.d.(driver.Logged); ok {
			lg.SetLogger(o.logger)
		}
	}
}
