package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/backoff"
)

// leasesResult is what `locker bench --leases N` measured on one backend:
// the cost of keeping N leases alive through one Locker.
type leasesResult struct {
	Backend string  `json:"backend"` // the URL, redacted
	Label   string  `json:"label"`
	Leases  int     `json:"leases"`
	TTLMS   float64 `json:"ttl_ms"`
	Window  float64 `json:"window_s"` // how long the costs were measured
	TakeS   float64 `json:"take_s"`   // how long taking the leases took
	// Calls is the backend's requests per second over the window, as its
	// servers count them (CallsWhat); -1 where there is no server to ask.
	Calls         float64 `json:"calls_per_sec"`
	CallsPerLease float64 `json:"calls_per_lease_per_sec"`
	CallsWhat     string  `json:"calls_counted,omitempty"`
	CPU           float64 `json:"client_cpu_percent"` // of one core
	Goroutines    int     `json:"goroutines_added"`   // while the leases are held, over before
	Lost          int     `json:"leases_lost"`
	Error         string  `json:"error,omitempty"`
}

// leasesConfig is --leases's: how many, their TTL, the window.
type leasesConfig struct {
	n      int
	ttl    time.Duration
	window time.Duration
}

// benchLeases holds cfg.n leases through one Locker on raw and measures
// what keeping them alive costs over the window.
func (e env) benchLeases(ctx context.Context, raw string, cfg leasesConfig) (leasesResult, error) {
	r := leasesResult{Backend: redactURL(raw), Label: shortName(raw), Leases: cfg.n, TTLMS: ms(cfg.ttl), Window: cfg.window.Seconds(), Calls: -1}
	b, err := e.open(ctx, raw)
	if err != nil {
		return r, err
	}
	defer b.Close()
	prefix := "locker-bench/" + strings.ToLower(rand.Text()[:8]) + "/lease/"
	warm, err := b.TryLock(ctx, prefix+"warm", locker.WithTTL(cfg.ttl))
	if err != nil {
		return r, b.explain(err)
	}
	defer warm.Unlock(context.WithoutCancel(ctx))
	before := runtime.NumGoroutine()
	start := time.Now()
	leases, err := takeLeases(ctx, b.Locker, prefix, cfg)
	defer releaseAll(ctx, leases)
	if err != nil {
		return r, b.explain(err)
	}
	r.TakeS = time.Since(start).Seconds()
	// Let the first renewals of every lease pass before measuring.
	if !backoff.Sleep(ctx, cfg.ttl/2) {
		return r, ctx.Err()
	}
	counter, counted := callCounter{}, false
	if u, err := url.Parse(raw); err == nil {
		counter, counted = counterFor(u)
	}
	r.CallsWhat = counter.what
	calls0, callsErr := int64(0), error(nil)
	if counted {
		calls0, callsErr = counter.read(ctx)
	}
	cpu0, t0 := cpuTime(), time.Now()
	if !backoff.Sleep(ctx, cfg.window) {
		return r, ctx.Err()
	}
	cpu1, elapsed := cpuTime(), time.Since(t0)
	r.Goroutines = runtime.NumGoroutine() - before
	if counted && callsErr == nil {
		if calls1, err := counter.read(ctx); err == nil {
			r.Calls = float64(calls1-calls0) / float64(counter.servers) / elapsed.Seconds()
			r.CallsPerLease = r.Calls / float64(cfg.n)
		}
	}
	r.CPU = 100 * float64(cpu1-cpu0) / float64(elapsed)
	for _, l := range leases {
		if l.Err() != nil {
			r.Lost++
		}
	}
	return r, nil
}

// benchLeasesAll runs benchLeases on each backend in turn and prints the
// table (or JSON); the first backend's error, if any, while the others
// still run.
func (e env) benchLeasesAll(ctx context.Context, backends []string, cfg leasesConfig, jsonOut bool) error {
	var results []leasesResult
	var first error
	for _, raw := range backends {
		r, err := e.benchLeases(ctx, raw, cfg)
		if err != nil {
			r.Error = scrub(err.Error())
			first = cmp.Or(first, err)
		}
		results = append(results, r)
		if ctx.Err() != nil {
			break
		}
	}
	if jsonOut {
		return cmp.Or(e.printJSON(results), first)
	}
	e.leasesTable(results)
	return first
}

// takeLeases takes cfg.n leases on distinct keys, a few at a time.
func takeLeases(ctx context.Context, l locker.Locker, prefix string, cfg leasesConfig) ([]locker.Lease, error) {
	leases := make([]locker.Lease, cfg.n)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	const takers = 8
	for w := range takers {
		wg.Go(func() {
			for i := w; i < cfg.n; i += takers {
				lease, err := l.TryLock(ctx, fmt.Sprintf("%s%d", prefix, i), locker.WithTTL(cfg.ttl))
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				leases[i] = lease
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return leases, err
	default:
		return leases, nil
	}
}

// releaseAll lets the leases taken go, a few at a time, best-effort.
func releaseAll(ctx context.Context, leases []locker.Lease) {
	ctx = context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	ch := make(chan locker.Lease)
	for range 8 {
		wg.Go(func() {
			for l := range ch {
				_ = l.Unlock(ctx)
			}
		})
	}
	for _, l := range leases {
		if l != nil {
			ch <- l
		}
	}
	close(ch)
	wg.Wait()
}

func (e env) leasesTable(results []leasesResult) {
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "BACKEND\tLEASES\tTTL\tTAKEN IN\tCALLS/s\tPER LEASE/s\tCLIENT CPU\tGOROUTINES +\tLOST\t")
	for _, r := range results {
		if r.Error != "" {
			fmt.Fprintf(w, "%s\tfailed: %s\t\t\t\t\t\t\t\t\n", r.Label, r.Error)
			continue
		}
		calls, per := "-", "-"
		if r.Calls >= 0 {
			calls, per = fmt.Sprintf("%.1f", r.Calls), fmt.Sprintf("%.4f", r.CallsPerLease)
		}
		fmt.Fprintf(w, "%s\t%d\t%v\t%.1f s\t%s\t%s\t%.1f%%\t%d\t%d\t\n", r.Label, r.Leases,
			time.Duration(r.TTLMS*float64(time.Millisecond)), r.TakeS, calls, per, r.CPU, r.Goroutines, r.Lost)
	}
	w.Flush()
	fmt.Fprintf(e.stdout, "\nOne Locker holds the leases, kept alive; measured over %.0f s after the first renewals. "+
		"CALLS/s: the backend's requests as its servers count them (Redis: scripts run; Redlock: per master; etcd: gRPC messages; "+
		"ZooKeeper: packets; Postgres: write transactions; MySQL: statements), the bench's own two readings included. "+
		"CLIENT CPU: of one core. GOROUTINES +: while held, over before taking them.\n", resultsWindow(results))
}

func resultsWindow(rs []leasesResult) float64 {
	for _, r := range rs {
		return r.Window
	}
	return 0
}
