package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBenchJSONAndPlot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "bench.db")
	plot := filepath.Join(dir, "bench.svg")
	r := cli(t, testEnv(t), "bench", "--backend", db, "--ops", "30", "--workers", "3", "--hold", "1ms",
		"--json", "--plot", plot).want(t, 0, "bench")
	var results []benchResult
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil {
		t.Fatalf("bench --json printed %q: %v", r.stdout, err)
	}
	if len(results) != 1 {
		t.Fatalf("%d results, want 1", len(results))
	}
	res := results[0]
	sum := 0
	for _, n := range res.PerWorker {
		sum += n
	}
	switch {
	case res.Error != "":
		t.Errorf("bench error: %s", res.Error)
	case len(res.PerWorker) != 3 || sum != 30:
		t.Errorf("acquisitions per worker %v, want 3 workers and 30 in all", res.PerWorker)
	case res.OpsPerSec <= 0 || res.LockUnlockP50 <= 0 || res.LockUnlockP99 < res.LockUnlockP50 || res.WaitP99 < res.WaitP50:
		t.Errorf("implausible figures: %+v", res)
	case res.Fairness <= 0 || res.Fairness > 1:
		t.Errorf("fairness %v outside (0, 1]", res.Fairness)
	}
	svg, err := os.ReadFile(plot)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(svg), "<svg") || !strings.Contains(string(svg), res.Label) || !strings.Contains(string(svg), "<rect") {
		t.Errorf("the plot is not an SVG chart naming %q:\n%s", res.Label, svg)
	}
}

// --keys spreads the contended workers over several keys.
func TestBenchKeys(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "bench.db")
	r := cli(t, testEnv(t), "bench", "--backend", db, "--ops", "40", "--workers", "4", "--keys", "8", "--json").want(t, 0, "bench")
	var results []benchResult
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil || len(results) != 1 {
		t.Fatalf("bench --json printed %q: %v", r.stdout, err)
	}
	res, sum := results[0], 0
	for _, n := range res.PerWorker {
		sum += n
	}
	if res.Error != "" || res.Keys != 8 || sum != 40 || res.OpsPerSec <= 0 {
		t.Fatalf("bench --keys 8: %+v, want 8 keys and 40 acquisitions", res)
	}
	if r := cli(t, testEnv(t), "bench", "--backend", db, "--keys", "0"); r.code != exitUsage {
		t.Fatalf("--keys 0: exit %d, want %d", r.code, exitUsage)
	}
}

// --shared adds the read-heavy mix and all readers, each with its
// throughput over the exclusive one's, to the JSON and the table.
func TestBenchShared(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "bench.db")
	env := testEnv(t)
	r := cli(t, env, "bench", "--backend", db, "--ops", "30", "--workers", "3", "--shared", "--json").want(t, 0, "bench --shared")
	var results []benchResult
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil || len(results) != 1 {
		t.Fatalf("bench --json printed %q: %v", r.stdout, err)
	}
	res := results[0]
	if res.Error != "" || res.ReadMixOpsPerSec <= 0 || res.ReadersOpsPerSec <= 0 {
		t.Fatalf("bench --shared: %+v; want the mix and all readers measured", res)
	}
	for _, c := range []struct {
		name   string
		x, ops float64
	}{{"read_mix_x", res.ReadMixX, res.ReadMixOpsPerSec}, {"readers_x", res.ReadersX, res.ReadersOpsPerSec}} {
		if want := c.ops / res.OpsPerSec; c.x != want {
			t.Errorf("%s %v; want %v, its ops/s over the exclusive ops/s", c.name, c.x, want)
		}
	}
	table := cli(t, env, "bench", "--backend", db, "--ops", "30", "--workers", "3", "--shared").want(t, 0, "bench --shared")
	if !strings.Contains(table.stdout, "90% READ ops/s") || !strings.Contains(table.stdout, "ALL READ ops/s") {
		t.Errorf("table %q; want the mix's and all readers' columns", table.stdout)
	}
}

// A backend that fails keeps the table's columns: its row says so, and
// the reason follows the table.
func TestBenchTableAlignedWhenABackendFails(t *testing.T) {
	t.Parallel()
	r := cli(t, testEnv(t), "bench", "--backend", "mem:", "--backend", "redis://127.0.0.1:1", "--ops", "20", "--shared")
	if r.code == 0 {
		t.Fatalf("bench with an unreachable backend: exit 0")
	}
	lines := strings.Split(r.stdout, "\n")
	var table []string
	for _, l := range lines {
		if l == "" {
			break
		}
		table = append(table, l)
	}
	if len(table) != 3 || !strings.Contains(table[2], "failed (see below)") {
		t.Fatalf("table %q; want a header, mem's row and the failed one", table)
	}
	width := utf8.RuneCountInString
	for _, l := range table[1:] {
		if width(l) != width(table[0]) {
			t.Errorf("row %q is %d wide, the header %d: not aligned", l, width(l), width(table[0]))
		}
	}
	if !strings.Contains(r.stdout, "redis 127.0.0.1:1 failed:") {
		t.Errorf("stdout %q; want the failure's reason below the table", r.stdout)
	}
}
