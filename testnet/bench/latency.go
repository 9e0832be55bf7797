package bench

import (
	"math"
	"slices"
	"time"
)

// recorder holds one agent's latencies; it is never shared between
// goroutines, so it needs no lock.
type recorder struct {
	lat []time.Duration
}

// newRecorder preallocates room for about expect samples, so the hot loop
// does not grow the slice.
func newRecorder(expect int) *recorder {
	if expect < 1024 {
		expect = 1024
	}
	return &recorder{lat: make([]time.Duration, 0, expect)}
}

func (r *recorder) add(d time.Duration) { r.lat = append(r.lat, d) }

// Latency summarises a phase's latencies, in milliseconds.
type Latency struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// summarize merges the recorders and computes the summary.
func summarize(recs []*recorder) Latency {
	n := 0
	for _, r := range recs {
		n += len(r.lat)
	}
	all := make([]time.Duration, 0, n)
	for _, r := range recs {
		all = append(all, r.lat...)
	}
	return summarizeDurations(all)
}

// summarizeDurations sorts all in place.
func summarizeDurations(all []time.Duration) Latency {
	if len(all) == 0 {
		return Latency{}
	}
	slices.Sort(all)
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	return Latency{
		Count: len(all),
		Mean:  ms(sum / time.Duration(len(all))),
		P50:   ms(percentile(all, 0.50)),
		P90:   ms(percentile(all, 0.90)),
		P99:   ms(percentile(all, 0.99)),
		Max:   ms(all[len(all)-1]),
	}
}

// percentile is the nearest-rank percentile of sorted: the smallest value
// with at least p of the samples at or below it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
