package main

import (
	"slices"
	"time"
)

// quantile returns the q-quantile (0..1) of sorted durations, nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1 // ceil(q·n)-1
	return sorted[max(0, min(len(sorted)-1, i))]
}

// jain is Jain's fairness index of per-worker acquisition counts:
// (Σx)² / (n·Σx²). It is 1 when every worker got the key equally often and
// falls to 1/n when one worker got it every time; unlike max/min it is not
// thrown by one unlucky worker in a short run.
func jain(counts []int) float64 {
	var sum, sq float64
	for _, c := range counts {
		sum += float64(c)
		sq += float64(c) * float64(c)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(counts)) * sq)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func sorted(ds []time.Duration) []time.Duration {
	slices.Sort(ds)
	return ds
}
