package conformance

import (
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	ds := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for q, want := range map[float64]time.Duration{0.5: 5, 0.99: 10, 0: 1, 1: 10} {
		if got := Quantile(ds, q); got != want {
			t.Errorf("Quantile(%v) = %v, want %v", q, got, want)
		}
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("Quantile of nothing is not 0")
	}
}

func TestFairness(t *testing.T) {
	for _, c := range []struct {
		per  []int
		want float64
	}{{[]int{5, 5, 5, 5}, 1}, {[]int{20, 0, 0, 0}, 0.25}, {[]int{0, 0}, 0}} {
		if got := (Contention{PerOwner: c.per}).Fairness(); got != c.want {
			t.Errorf("Fairness(%v) = %v, want %v", c.per, got, c.want)
		}
	}
}

func TestKeyOf(t *testing.T) {
	one, four := keyOf("k", 1), keyOf("k", 4)
	if one(7) != "k" {
		t.Errorf("one key: %q, want k", one(7))
	}
	seen := map[string]bool{}
	for n := range int64(8) {
		seen[four(n)] = true
	}
	if len(seen) != 4 || !seen["k/0"] || !seen["k/3"] {
		t.Errorf("four keys over 8 acquisitions: %v, want k/0 … k/3", seen)
	}
}

// Holders and Idle follow the holds: two readers overlapping for half of
// their time, then a writer after a gap.
func TestHoldersAndIdle(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(ms)) }
	c := Contention{Elapsed: 10 * time.Millisecond, spans: []span{
		{at(0), at(4)}, {at(2), at(6)}, // readers: 6 ms busy, 8 ms held
		{at(8), at(10)}, // a writer, after 2 ms with nobody
	}}
	if got, want := c.Holders(), 10.0/8; got != want {
		t.Errorf("Holders = %v, want %v (10 ms held over 8 ms busy)", got, want)
	}
	if got, want := c.Idle(), 0.2; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("Idle = %v, want %v (2 ms of 10 with no holder)", got, want)
	}
	if (Contention{}).Holders() != 0 || (Contention{}).Idle() != 0 {
		t.Error("a run with no holds: Holders or Idle not 0")
	}
}

// Hold and HandOff split the run on one key: three holds of 1, 3 and 2
// ms, handed on after 2 and 1 ms.
func TestHoldAndHandOff(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(ms)) }
	c := Contention{spans: []span{{at(3), at(6)}, {at(0), at(1)}, {at(7), at(9)}}} // in the order Unlocks finished
	if got := c.Hold(0.5); got != 2*time.Millisecond {
		t.Errorf("Hold(0.5) = %v, want 2ms", got)
	}
	if got := c.HandOff(1); got != 2*time.Millisecond {
		t.Errorf("HandOff(1) = %v, want 2ms (from 1 ms to 3 ms)", got)
	}
	if got := c.HandOff(0); got != time.Millisecond {
		t.Errorf("HandOff(0) = %v, want 1ms (from 6 ms to 7 ms)", got)
	}
	if (Contention{}).Hold(0.5) != 0 || (Contention{}).HandOff(0.5) != 0 {
		t.Error("a run with no holds: Hold or HandOff not 0")
	}
}
