package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance"
)

// benchResult is what `locker bench` measured on one backend. Times are in
// milliseconds.
type benchResult struct {
	Backend string  `json:"backend"` // the URL, redacted
	Label   string  `json:"label"`
	Workers int     `json:"workers"`
	Keys    int     `json:"keys"` // the contended phase's keys
	Ops     int     `json:"ops"`
	HoldMS  float64 `json:"hold_ms"`
	// Uncontended: one client locks and unlocks a key of its own.
	LockUnlockP50 float64 `json:"lock_unlock_p50_ms"`
	LockUnlockP99 float64 `json:"lock_unlock_p99_ms"`
	// RoundTrip is one Status query, the nearest thing to a plain round trip
	// every backend offers; RTTx is lock+unlock p50 in multiples of it.
	RoundTrip float64 `json:"round_trip_ms,omitempty"`
	RTTx      float64 `json:"rtt_x,omitempty"`
	// Contended: Workers clients, each its own Locker, take one key in turn
	// (Keys keys: the n-th acquisition key n mod Keys).
	OpsPerSec float64 `json:"contended_ops_per_sec"`
	WaitP50   float64 `json:"wait_p50_ms"`
	WaitP99   float64 `json:"wait_p99_ms"`
	Fairness  float64 `json:"fairness_jain"`
	PerWorker []int   `json:"acquisitions_per_worker"`
	// ReadMix (--shared): the same workers, nine acquisitions in ten
	// shared; ReadMixX is its throughput over the exclusive one's.
	ReadMixOpsPerSec float64 `json:"read_mix_ops_per_sec,omitempty"`
	ReadMixWaitP99   float64 `json:"read_mix_wait_p99_ms,omitempty"`
	ReadMixX         float64 `json:"read_mix_x,omitempty"`
	// Readers (--shared): every acquisition shared, the most a read mix
	// can do against this backend from this machine; ReadersX is its
	// throughput over the exclusive one's.
	ReadersOpsPerSec float64 `json:"readers_ops_per_sec,omitempty"`
	ReadersX         float64 `json:"readers_x,omitempty"`
	Error            string  `json:"error,omitempty"`
}

type benchConfig struct {
	workers, ops int
	keys         int // the contended phase's keys
	hold         time.Duration
	shared       bool // also run the read-heavy mix, and all readers
}

// benchOpts are bench's flags.
type benchOpts struct {
	backends                   stringsFlag
	workers, keys, ops, leases int
	hold, ttl, window          time.Duration
	shared, json               bool
	plot                       string
}

// benchFlags defines bench's flags on fs.
func benchFlags(fs *flag.FlagSet, f *benchOpts) {
	fs.Var(&f.backends, "backend", "backend `URL` (repeat to compare backends)")
	fs.IntVar(&f.workers, "workers", 8, "contending clients, each with its own Locker")
	fs.IntVar(&f.keys, "keys", 1, "keys the contending workers spread over (1: all on one key)")
	fs.IntVar(&f.ops, "ops", 1000, "lock+unlock operations per phase")
	fs.DurationVar(&f.hold, "hold", time.Millisecond, "how long each contended acquisition holds the key")
	fs.BoolVar(&f.shared, "shared", false, "also measure a read-heavy mix (nine acquisitions in ten shared) and all readers, the most a mix can do here")
	fs.IntVar(&f.leases, "leases", 0, "instead, hold `N` leases through one Locker, kept alive, and measure what that costs: backend calls/s, client CPU, goroutines")
	fs.DurationVar(&f.ttl, "ttl", 3*time.Second, "with --leases: the leases' TTL")
	fs.DurationVar(&f.window, "for", 10*time.Second, "with --leases: how long to measure")
	fs.BoolVar(&f.json, "json", false, "print JSON instead of a table")
	fs.StringVar(&f.plot, "plot", "", "write an SVG bar chart comparing the backends to `FILE`")
}

func (e env) bench(ctx context.Context, args []string) error {
	var f benchOpts
	fs := newFlags("bench")
	benchFlags(fs, &f)
	pos, err := parseInterleaved(fs, args)
	switch {
	case err != nil:
		return err
	case len(pos) > 0:
		return usageErrorf("bench: unexpected argument %q (backends go in --backend URL)", pos[0])
	case f.workers < 1 || f.ops < 1 || f.keys < 1 || f.hold < 0:
		return usageErrorf("bench: --workers, --ops and --keys must be at least 1, --hold not negative")
	case f.leases < 0 || (f.leases > 0 && (f.ttl <= 0 || f.window <= 0)):
		return usageErrorf("bench: --leases must not be negative, --ttl and --for must be positive")
	}
	backends := f.backends
	if len(backends) == 0 {
		raw, err := e.backendURL("")
		if err != nil {
			return err
		}
		backends = append(backends, raw)
	}
	ctx, cancel := signalContext(ctx)
	defer cancel()
	if f.leases > 0 {
		return e.benchLeasesAll(ctx, backends, leasesConfig{n: f.leases, ttl: f.ttl, window: f.window}, f.json)
	}
	cfg := benchConfig{workers: f.workers, ops: f.ops, keys: f.keys, hold: f.hold, shared: f.shared}
	results, first := e.benchAll(ctx, backends, cfg)
	if f.json {
		if err := e.printJSON(results); err != nil {
			return err
		}
	} else {
		e.benchTable(results)
	}
	if f.plot != "" {
		if err := os.WriteFile(f.plot, []byte(plotSVG(results, cfg)), 0o644); err != nil {
			return fmt.Errorf("writing the plot: %w", err)
		}
	}
	return first
}

// benchAll runs the workload on each backend in turn; first is the first
// backend's error, if any, while the others still run.
func (e env) benchAll(ctx context.Context, backends []string, cfg benchConfig) (results []benchResult, first error) {
	for _, raw := range backends {
		r, err := e.benchOne(ctx, raw, cfg)
		if err != nil {
			r.Error = scrub(err.Error())
			if first == nil {
				first = err
			}
		}
		results = append(results, r)
		if ctx.Err() != nil {
			break
		}
	}
	return results, first
}

func (e env) benchOne(ctx context.Context, raw string, cfg benchConfig) (benchResult, error) {
	r := benchResult{Backend: redactURL(raw), Label: shortName(raw), Workers: cfg.workers, Keys: max(cfg.keys, 1), Ops: cfg.ops, HoldMS: ms(cfg.hold)}
	clients := make([]*backend, 0, cfg.workers+1)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range cfg.workers + 1 {
		b, err := e.open(ctx, raw)
		if err != nil {
			return r, err
		}
		clients = append(clients, b)
	}
	prefix := "locker-bench/" + strings.ToLower(rand.Text()[:8]) + "/"
	phases := 2
	if cfg.shared {
		phases += 2 // the mix, and all readers
	}
	bar := newProgress(e.stderr, r.Label, phases*cfg.ops)
	defer bar.finish()

	solo := clients[0]
	lats, err := uncontended(ctx, solo.Locker, prefix+"solo", cfg.ops, bar)
	if err != nil {
		return r, solo.explain(err)
	}
	r.LockUnlockP50, r.LockUnlockP99 = ms(conformance.Quantile(lats, 0.5)), ms(conformance.Quantile(lats, 0.99))
	if rtt := roundTrip(ctx, solo.Locker, prefix+"free"); rtt > 0 {
		r.RoundTrip = ms(rtt)
		r.RTTx = float64(conformance.Quantile(lats, 0.5)) / float64(rtt)
	}

	lockers := make([]locker.Locker, cfg.workers)
	for i := range lockers {
		lockers[i] = clients[i+1].Locker
	}
	c, err := conformance.ContendKeys(ctx, lockers, prefix+"contended", r.Keys, cfg.ops, cfg.hold, func() { bar.add(1) })
	if err != nil {
		return r, solo.explain(err)
	}
	r.OpsPerSec = c.OpsPerSec()
	r.WaitP50, r.WaitP99 = ms(c.Wait(0.5)), ms(c.Wait(0.99))
	r.Fairness = c.Fairness()
	r.PerWorker = c.PerOwner
	if cfg.shared {
		if err := benchShared(ctx, &r, lockers, prefix, cfg, bar); err != nil {
			return r, solo.explain(err)
		}
	}
	return r, nil
}

// benchShared runs --shared's phases on the contended phase's lockers:
// the read-heavy mix, then all readers, each against r's exclusive ops/s.
func benchShared(ctx context.Context, r *benchResult, lockers []locker.Locker, prefix string, cfg benchConfig, bar *progress) error {
	m, err := conformance.ReadMix(ctx, lockers, prefix+"read-mix", cfg.ops, cfg.hold, func() { bar.add(1) })
	if err != nil {
		return err
	}
	r.ReadMixOpsPerSec, r.ReadMixWaitP99 = m.OpsPerSec(), ms(m.Wait(0.99))
	r.ReadMixX = r.ReadMixOpsPerSec / r.OpsPerSec
	a, err := conformance.Readers(ctx, lockers, prefix+"readers", cfg.ops, cfg.hold, func() { bar.add(1) })
	if err != nil {
		return err
	}
	r.ReadersOpsPerSec = a.OpsPerSec()
	r.ReadersX = r.ReadersOpsPerSec / r.OpsPerSec
	return nil
}

// uncontended times ops lock+unlock pairs on a key nobody else uses.
func uncontended(ctx context.Context, l locker.Locker, key string, ops int, bar *progress) ([]time.Duration, error) {
	lats := make([]time.Duration, 0, ops)
	for range ops {
		t0 := time.Now()
		lease, err := l.Lock(ctx, key)
		if err != nil {
			return nil, err
		}
		if err := lease.Unlock(ctx); err != nil {
			return nil, fmt.Errorf("unlock: %w", err)
		}
		lats = append(lats, time.Since(t0))
		bar.add(1)
	}
	return sorted(lats), nil
}

// roundTrip is the median of a few Status queries of a free key, or 0 when
// the backend has no Admin.
func roundTrip(ctx context.Context, l locker.Locker, key string) time.Duration {
	adm, ok := l.(locker.Admin)
	if !ok {
		return 0
	}
	var ds []time.Duration
	for range 50 {
		t0 := time.Now()
		if _, err := adm.Status(ctx, key); !errors.Is(err, locker.ErrNotHeld) {
			return 0
		}
		ds = append(ds, time.Since(t0))
	}
	return conformance.Quantile(sorted(ds), 0.5)
}

func (e env) benchTable(results []benchResult) {
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	mix := len(results) > 0 && results[0].ReadMixOpsPerSec > 0
	head := "BACKEND\tLOCK+UNLOCK p50\tp99\tRTT×\tCONTENDED ops/s\tWAIT p50\tWAIT p99\tFAIRNESS\t"
	if mix {
		head += "90% READ ops/s\t× EXCL\tWAIT p99\tALL READ ops/s\t× EXCL\t"
	}
	fmt.Fprintln(w, head)
	var failed []benchResult
	for _, r := range results {
		if r.Error != "" { // the reason below the table, which keeps its columns
			fmt.Fprintf(w, "%s\tfailed (see below)\t-\t-\t-\t-\t-\t-\t", r.Label)
			if mix {
				fmt.Fprint(w, "-\t-\t-\t-\t-\t")
			}
			fmt.Fprintln(w)
			failed = append(failed, r)
			continue
		}
		rttx := "-"
		if r.RTTx > 0 {
			rttx = fmt.Sprintf("%.1f", r.RTTx)
		}
		fmt.Fprintf(w, "%s\t%.2f ms\t%.2f ms\t%s\t%.0f\t%.1f ms\t%.1f ms\t%.3f\t",
			r.Label, r.LockUnlockP50, r.LockUnlockP99, rttx, r.OpsPerSec, r.WaitP50, r.WaitP99, r.Fairness)
		if mix {
			fmt.Fprintf(w, "%.0f\t%.2f\t%.1f ms\t%.0f\t%.2f\t", r.ReadMixOpsPerSec, r.ReadMixX, r.ReadMixWaitP99, r.ReadersOpsPerSec, r.ReadersX)
		}
		fmt.Fprintln(w)
	}
	w.Flush()
	for _, r := range failed {
		fmt.Fprintf(e.stdout, "\n%s failed: %s\n", r.Label, r.Error)
	}
	if len(results) > 0 {
		r := results[0]
		over := "one key"
		if r.Keys > 1 {
			over = fmt.Sprintf("%d keys, the n-th acquisition key n mod %d", r.Keys, r.Keys)
		}
		fmt.Fprintf(e.stdout, "\n%d ops per phase; contended: %d workers, each its own client, holding %v, on %s. "+
			"RTT× = lock+unlock p50 / one Status query. FAIRNESS = Jain's index of acquisitions per worker (1 = even, %.3f = one worker got all).\n",
			r.Ops, r.Workers, time.Duration(r.HoldMS*float64(time.Millisecond)), over, 1/float64(r.Workers))
	}
}
