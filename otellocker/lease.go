package otellocker

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/locker-go/locker"
)

// lease is a lease handed out by the wrapper: its Unlock and Refresh run
// under spans, and its end is timed and counted once, as it happens (by
// Unlock, or by the goroutine that waits for Done).
type lease struct {
	locker.Lease
	w     *wrapped
	attrs []attribute.KeyValue
	start time.Time
	once  sync.Once
}

// watch counts lease live until it ends.
func (w *wrapped) watch(l locker.Lease, attrs []attribute.KeyValue) locker.Lease {
	w.live.Add(context.Background(), 1, metric.WithAttributes(attrs...))
	wl := &lease{Lease: l, w: w, attrs: attrs, start: time.Now()}
	go func() {
		<-l.Done()
		wl.ended()
	}()
	return wl
}

// ended records, once, the end of a lease that has ended: its hold time
// by how it ended, and a loss.
func (l *lease) ended() {
	l.once.Do(func() {
		ctx, base := context.Background(), metric.WithAttributes(l.attrs...)
		how := "unlocked"
		if errors.Is(l.Err(), locker.ErrLeaseLost) {
			how = "lost"
			l.w.lost.Add(ctx, 1, base)
		}
		l.w.live.Add(ctx, -1, base)
		l.w.hold.Record(ctx, time.Since(l.start).Seconds(), metric.WithAttributes(append(l.attrs, attribute.String("locker.ended", how))...))
	})
}

func (l *lease) Unlock(ctx context.Context) error {
	err := l.span(ctx, "locker.Unlock", l.Lease.Unlock)
	select {
	case <-l.Done(): // recorded before Unlock returns, not later
		l.ended()
	default:
	}
	return err
}

func (l *lease) Refresh(ctx context.Context) error {
	return l.span(ctx, "locker.Refresh", l.Lease.Refresh)
}

// span runs call under a span named name.
func (l *lease) span(ctx context.Context, name string, call func(context.Context) error) error {
	attrs := append(l.attrs, attribute.Int64("locker.fence", int64(l.Fence())))
	if l.w.c.keys {
		attrs = append(attrs, attribute.String("locker.key", l.Key()))
	}
	ctx, span := l.w.tracer.Start(ctx, name, trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	err := call(ctx)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}
