package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// latencySummary is the distribution of one set of recorded latencies, in milliseconds.
type latencySummary struct {
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
}

// summarize sorts d in place and returns its nearest-rank p50, p99 and maximum. An empty d
// gives zeros.
func summarize(d []time.Duration) latencySummary {
	if len(d) == 0 {
		return latencySummary{}
	}
	slices.Sort(d)
	return latencySummary{P50Ms: ms(percentile(d, 50)), P99Ms: ms(percentile(d, 99)), MaxMs: ms(d[len(d)-1])}
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of sorted, which must not
// be empty: the smallest value at or below which p% of the values lie.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(p/100*float64(len(sorted)) + 0.999999999)
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// median returns the median of xs (the mean of the middle two for an even count); 0 for none.
// xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

// round3 keeps three decimals so JSON output stays readable.
func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// rate returns count per second over d, or 0 when d is not positive.
func rate(count int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return round3(float64(count) / d.Seconds())
}

// table writes rows as aligned columns; the first row is the header.
func table(w io.Writer, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	_ = tw.Flush()
}

func f0(v float64) string { return fmt.Sprintf("%.0f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

// cpuMeter measures the CPU this process (the load tool) uses over an interval, to tell
// whether the tool itself, rather than the server, is what saturates the machine.
type cpuMeter struct {
	wall time.Time
	cpu  time.Duration
}

func startCPU() cpuMeter { return cpuMeter{wall: time.Now(), cpu: processCPU()} }

// cores returns the CPU used since startCPU divided by the wall time: 1.0 is one core busy.
// It returns -1 where the platform does not report process CPU time.
func (m cpuMeter) cores() float64 {
	now := processCPU()
	if now < 0 || m.cpu < 0 {
		return -1
	}
	return round3(float64(now-m.cpu) / float64(time.Since(m.wall)))
}
