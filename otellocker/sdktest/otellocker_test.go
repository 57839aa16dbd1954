package sdktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/locker-go/locker"
	_ "github.com/locker-go/locker/adapters/mem"
	"github.com/locker-go/locker/otellocker"
)

// recorded is a wrapped mem Locker and what its providers recorded.
type recorded struct {
	l      locker.Locker
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

func newRecorded(t *testing.T, opts ...otellocker.Option) recorded {
	t.Helper()
	inner, err := locker.Open(t.Context(), "mem://"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	r := recorded{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	r.l = otellocker.Wrap(inner, append([]otellocker.Option{otellocker.WithTracerProvider(tp),
		otellocker.WithMeterProvider(mp), otellocker.WithBackend("mem")}, opts...)...)
	t.Cleanup(func() { r.l.Close() })
	return r
}

// metrics collects the metrics, by name.
func (r recorded) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sumWhere is the value of a counter's point whose attributes include kv.
func sumWhere(t *testing.T, a metricdata.Aggregation, kv ...attribute.KeyValue) int64 {
	t.Helper()
	if a == nil {
		return 0 // not recorded yet: an instrument appears with its first value
	}
	s, ok := a.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%T is not an int64 sum", a)
	}
	var n int64
	for _, p := range s.DataPoints {
		match := true
		for _, want := range kv {
			if v, ok := p.Attributes.Value(want.Key); !ok || v != want.Value {
				match = false
			}
		}
		if match {
			n += p.Value
		}
	}
	return n
}

// Spans for Lock, TryLock, Refresh and Unlock, with the backend, mode,
// outcome and fence, and the key only when asked; a refused TryLock is an
// outcome, not an error.
func TestSpans(t *testing.T) {
	ctx := t.Context()
	r := newRecorded(t)
	lease, err := r.l.Lock(ctx, "reports/daily", locker.Shared())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.l.TryLock(ctx, "reports/daily"); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryLock of a shared key: %v, want ErrLocked", err)
	}
	if err := lease.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("second Unlock: %v", err)
	}
	ended := r.spans.Ended()
	var names []string
	for _, s := range ended {
		names = append(names, s.Name())
		attrs := attribute.NewSet(s.Attributes()...)
		if v, _ := attrs.Value("locker.backend"); v.AsString() != "mem" {
			t.Errorf("%s: backend %q", s.Name(), v.AsString())
		}
		if _, ok := attrs.Value("locker.key"); ok {
			t.Errorf("%s carries the key without WithKeys", s.Name())
		}
	}
	want := []string{"locker.Lock", "locker.TryLock", "locker.Refresh", "locker.Unlock", "locker.Unlock"}
	if len(names) != len(want) {
		t.Fatalf("spans %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("spans %v, want %v", names, want)
		}
	}
	lock := attribute.NewSet(ended[0].Attributes()...)
	if v, _ := lock.Value("locker.mode"); v.AsString() != "shared" {
		t.Errorf("Lock's mode %q, want shared", v.AsString())
	}
	if v, _ := lock.Value("locker.fence"); v.AsInt64() != int64(lease.Fence()) {
		t.Errorf("Lock's fence %d, want %d", v.AsInt64(), lease.Fence())
	}
	if try := ended[1]; try.Status().Code != 0 || len(try.Events()) != 0 {
		t.Errorf("a refused TryLock recorded as an error: %v %v", try.Status(), try.Events())
	}
	if second := ended[4]; second.Status().Description == "" {
		t.Errorf("the second Unlock's ErrNotHeld is not the span's error")
	}
}

func TestSpansWithKeys(t *testing.T) {
	r := newRecorded(t, otellocker.WithKeys())
	lease, err := r.l.Lock(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	_ = lease.Unlock(t.Context())
	for _, s := range r.spans.Ended() {
		set := attribute.NewSet(s.Attributes()...)
		if v, _ := set.Value("locker.key"); v.AsString() != "k" {
			t.Errorf("%s: key %q, want k", s.Name(), v.AsString())
		}
	}
}

// Metrics: acquisitions and waits by outcome, live leases, hold time by
// how the lease ended, and a lease lost counted when it is lost (here to
// ForceUnlock, unlocked by nobody).
func TestMetrics(t *testing.T) {
	ctx := t.Context()
	r := newRecorded(t)
	held, err := r.l.Lock(ctx, "a", locker.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.l.TryLock(ctx, "a"); !errors.Is(err, locker.ErrLocked) {
		t.Fatal(err)
	}
	other, err := r.l.Lock(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	m := r.metrics(t)
	if n := sumWhere(t, m["locker.leases.live"], attribute.String("locker.backend", "mem")); n != 2 {
		t.Errorf("live leases %d, want 2", n)
	}
	if n := sumWhere(t, m["locker.acquisitions"], attribute.String("locker.outcome", "locked")); n != 1 {
		t.Errorf("locked acquisitions %d, want 1", n)
	}
	if err := r.l.(locker.Admin).ForceUnlock(ctx, "a"); err != nil { // the wrapper keeps Admin
		t.Fatal(err)
	}
	<-held.Done()
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The loss is recorded by the goroutine that saw Done close, one
	// instrument after another: wait until all of it is in.
	deadline := time.Now().Add(10 * time.Second)
	for m = r.metrics(t); sumWhere(t, m["locker.leases.lost"]) != 1 || endsOf(t, m)["lost"] != 1; m = r.metrics(t) {
		if time.Now().After(deadline) {
			t.Fatalf("lost leases %d, hold times by end %v; want one lost", sumWhere(t, m["locker.leases.lost"]), endsOf(t, m))
		}
		time.Sleep(time.Millisecond) // metrics offer nothing to wait on
	}
	if n := sumWhere(t, m["locker.leases.live"]); n != 0 {
		t.Errorf("live leases %d after both ended, want 0", n)
	}
	if n := sumWhere(t, m["locker.acquisitions"], attribute.String("locker.outcome", "acquired")); n != 2 {
		t.Errorf("acquired %d, want 2", n)
	}
	if ends := endsOf(t, m); ends["lost"] != 1 || ends["unlocked"] != 1 {
		t.Errorf("hold times by end %v, want one lost and one unlocked", ends)
	}
	if _, ok := m["locker.wait.duration"].(metricdata.Histogram[float64]); !ok {
		t.Errorf("no wait histogram: %v", m)
	}
}

// endsOf counts the hold times recorded in m by how the lease ended.
func endsOf(t *testing.T, m map[string]metricdata.Aggregation) map[string]uint64 {
	t.Helper()
	hold, ok := m["locker.hold.duration"].(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("hold: %T", m["locker.hold.duration"])
	}
	ends := map[string]uint64{}
	for _, p := range hold.DataPoints {
		v, _ := p.Attributes.Value("locker.ended")
		ends[v.AsString()] += p.Count
	}
	return ends
}

// The wrapper keeps the Locker's Admin side and gives the Locker back
// through Unwrap.
func TestWrapperKeepsAdminAndUnwraps(t *testing.T) {
	inner, err := locker.Open(t.Context(), "mem://"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	w := otellocker.Wrap(inner)
	if _, ok := w.(locker.Admin); !ok {
		t.Error("the wrapper of an Admin Locker is no locker.Admin")
	}
	u, ok := w.(interface{ Unwrap() locker.Locker })
	if !ok || u.Unwrap() != inner {
		t.Errorf("Unwrap: %v; want the Locker given to Wrap", ok)
	}
}
