package otellocker

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/locker-go/locker"
)

// scope names the tracer and meter.
const scope = "github.com/locker-go/locker/otellocker"

// Option configures Wrap.
type Option func(*config)

type config struct {
	tp      trace.TracerProvider
	mp      metric.MeterProvider
	backend string
	keys    bool
}

// WithTracerProvider uses tp instead of the global tracer provider.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithMeterProvider uses mp instead of the global meter provider.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithBackend names the backend in every span and metric (attribute
// locker.backend), e.g. "redis" or "etcd"; default "locker".
func WithBackend(name string) Option { return func(c *config) { c.backend = name } }

// WithKeys adds the key to spans (attribute locker.key). Metrics never
// carry it: keys are unbounded.
func WithKeys() Option { return func(c *config) { c.keys = true } }

// Wrap returns l with spans and metrics around its calls and leases.
func Wrap(l locker.Locker, opts ...Option) locker.Locker {
	c := config{tp: otel.GetTracerProvider(), mp: otel.GetMeterProvider(), backend: "locker"}
	for _, o := range opts {
		o(&c)
	}
	w := &wrapped{l: l, c: c, tracer: c.tp.Tracer(scope), backend: attribute.String("locker.backend", c.backend)}
	w.instruments(c.mp.Meter(scope))
	adm, isAdmin := l.(locker.Admin)
	fr, isRaiser := l.(locker.FenceRaiser)
	switch {
	case isAdmin && isRaiser:
		return &adminRaiser{wrapped: w, Admin: adm, FenceRaiser: fr}
	case isAdmin:
		return &withAdmin{wrapped: w, Admin: adm}
	case isRaiser:
		return &withRaiser{wrapped: w, FenceRaiser: fr}
	}
	return w
}

// The wrapped Locker, with l's admin and fence-raising sides passed on.
type (
	withAdmin struct {
		*wrapped
		locker.Admin
	}
	withRaiser struct {
		*wrapped
		locker.FenceRaiser
	}
	adminRaiser struct {
		*wrapped
		locker.Admin
		locker.FenceRaiser
	}
)

// wrapped is Wrap's Locker.
type wrapped struct {
	l       locker.Locker
	c       config
	tracer  trace.Tracer
	backend attribute.KeyValue

	wait, hold   metric.Float64Histogram
	acquisitions metric.Int64Counter
	lost         metric.Int64Counter
	live         metric.Int64UpDownCounter
}

// Unwrap returns the Locker Wrap was given, for code that looks past
// wrappers (as errors.Unwrap does for errors).
func (w *wrapped) Unwrap() locker.Locker { return w.l }

// instruments makes the metrics; an instrument the provider refuses is
// left a no-op (the API's) rather than failing the Locker.
func (w *wrapped) instruments(m metric.Meter) {
	w.wait, _ = m.Float64Histogram("locker.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("How long Lock and TryLock took, by outcome"))
	w.hold, _ = m.Float64Histogram("locker.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("From a lease's grant to its end, by how it ended"))
	w.acquisitions, _ = m.Int64Counter("locker.acquisitions",
		metric.WithDescription("Lock and TryLock calls, by outcome"))
	w.lost, _ = m.Int64Counter("locker.leases.lost", metric.WithDescription("Leases that ended lost"))
	w.live, _ = m.Int64UpDownCounter("locker.leases.live", metric.WithDescription("Leases held now"))
}

func (w *wrapped) Lock(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return w.acquire(ctx, "locker.Lock", key, opts, w.l.Lock)
}

func (w *wrapped) TryLock(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return w.acquire(ctx, "locker.TryLock", key, opts, w.l.TryLock)
}

func (w *wrapped) Close() error { return w.l.Close() }

// acquire runs one Lock or TryLock under a span, and times and counts it.
func (w *wrapped) acquire(ctx context.Context, name, key string, opts []locker.Option,
	call func(context.Context, string, ...locker.Option) (locker.Lease, error)) (locker.Lease, error) {
	attrs := []attribute.KeyValue{w.backend, attribute.String("locker.mode", mode(key, opts))}
	spanAttrs := attrs
	if w.c.keys {
		spanAttrs = append(spanAttrs, attribute.String("locker.key", key))
	}
	ctx, span := w.tracer.Start(ctx, name, trace.WithAttributes(spanAttrs...), trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	start := time.Now()
	lease, err := call(ctx, key, opts...)
	outcome := outcomeOf(err)
	metricAttrs := metric.WithAttributes(append(attrs, attribute.String("locker.outcome", outcome))...)
	w.wait.Record(ctx, time.Since(start).Seconds(), metricAttrs)
	w.acquisitions.Add(ctx, 1, metricAttrs)
	span.SetAttributes(attribute.String("locker.outcome", outcome))
	if err != nil {
		if outcome == "error" {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		return nil, err
	}
	span.SetAttributes(attribute.Int64("locker.fence", int64(lease.Fence())))
	return w.watch(lease, attrs), nil
}

// mode is the mode key is asked for in, as an attribute's value.
func mode(key string, opts []locker.Option) string {
	if o, err := locker.Resolve(key, opts...); err == nil && o.Shared {
		return "shared"
	}
	return "exclusive"
}

// outcomeOf names how an acquisition ended.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return "acquired"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	case errors.Is(err, locker.ErrLocked):
		return "locked"
	default:
		return "error"
	}
}
