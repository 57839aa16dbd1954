package main

import (
	"slices"
	"time"
)

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func sorted(ds []time.Duration) []time.Duration {
	slices.Sort(ds)
	return ds
}
