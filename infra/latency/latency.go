// Package latency reports latency percentiles from Go benchmarks, as
// custom metrics that infra/bench puts in docs/benchmarks.md.
package latency

import (
	"slices"
	"testing"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 1) of d, which it sorts.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(p*float64(len(d))))]
}

// Report reports the p50 and p99 of the per-operation durations d as the
// metrics p50-ns and p99-ns.
func Report(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	b.ReportMetric(float64(Percentile(d, 0.50).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(Percentile(d, 0.99).Nanoseconds()), "p99-ns")
}
