package etcd_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance"
)

// BenchmarkMutexBaseline measures etcd's own concurrency.Mutex the way
// conformance.Bench measures the adapter, on the same server at the same
// time, so that the targets (5× its contended ops/s) are compared
// under equal load rather than against DESIGN.md's figures alone.
func BenchmarkMutexBaseline(b *testing.B) {
	be := testBackend(b)
	b.Run("Uncontended", func(b *testing.B) {
		c := client(b, be.addr)
		m := mutexLocker{c: c, s: session(b, c)}
		ctx := context.Background()
		const n = 200
		start := time.Now()
		for range n {
			if _, err := c.Get(ctx, be.prefix+"rtt"); err != nil {
				b.Fatal(err)
			}
		}
		rtt := time.Since(start) / n
		key := be.prefix + "mutex-baseline/" + b.Name()
		b.ResetTimer()
		start = time.Now()
		for b.Loop() {
			l, err := m.Lock(ctx, key)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(time.Since(start)/time.Duration(b.N))/float64(rtt), "rtt-x")
	})
	b.Run("Contended", func(b *testing.B) {
		lockers := make([]locker.Locker, 8)
		for i := range lockers {
			c := client(b, be.addr)
			lockers[i] = mutexLocker{c: c, s: session(b, c)}
		}
		b.ResetTimer()
		res, err := conformance.Contend(context.Background(), lockers, be.prefix+"mutex-baseline/"+b.Name(), b.N, time.Millisecond)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.OpsPerSec(), "ops/s")
		b.ReportMetric(float64(res.Wait(0.50).Microseconds())/1000, "p50-wait-ms")
		b.ReportMetric(float64(res.Wait(0.99).Microseconds())/1000, "p99-wait-ms")
	})
}

func session(b *testing.B, c *clientv3.Client) *concurrency.Session {
	s, err := concurrency.NewSession(c, concurrency.WithTTL(15))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// mutexLocker is just enough of a locker.Locker over concurrency.Mutex for
// conformance.Contend: Lock and Unlock.
type mutexLocker struct {
	c *clientv3.Client
	s *concurrency.Session
}

func (m mutexLocker) Lock(ctx context.Context, key string, _ ...locker.Option) (locker.Lease, error) {
	mu := concurrency.NewMutex(m.s, key)
	if err := mu.Lock(ctx); err != nil {
		return nil, err
	}
	return mutexLease{mu}, nil
}

func (m mutexLocker) TryLock(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return nil, locker.ErrLocked // not used by Contend
}

func (m mutexLocker) Close() error { return nil }

type mutexLease struct{ mu *concurrency.Mutex }

func (l mutexLease) Key() string                       { return l.mu.Key() }
func (l mutexLease) Owner() string                     { return "" }
func (l mutexLease) Fence() uint64                     { return uint64(l.mu.Header().Revision) }
func (l mutexLease) Deadline() time.Time               { return time.Time{} }
func (l mutexLease) Refresh(ctx context.Context) error { return nil }
func (l mutexLease) Unlock(ctx context.Context) error  { return l.mu.Unlock(ctx) }
func (l mutexLease) Done() <-chan struct{}             { return nil }
func (l mutexLease) Err() error                        { return nil }
