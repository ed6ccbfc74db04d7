package testenv_test

import (
	"slices"
	"testing"
	"time"

	"github.com/opemu/opemu/testenv"
)

// BenchmarkFork is testenv.Fork of an environment holding 1,000 objects (a suite's fixture:
// ConfigMaps in two namespaces owned by a custom resource, its CRD, the cluster's own
// objects), then Stop of the fork. ms/median is the median of the forks alone (SPEC §23's goal:
// under 5 ms), ms/p90 their 90th percentile; ms/fork+stop is the mean of both together.
func BenchmarkFork(b *testing.B) {
	env := fixture(b, 1000, testenv.Options{})
	var took []time.Duration
	start := time.Now()
	for b.Loop() {
		t0 := time.Now()
		fork, err := testenv.Fork(env)
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
		if err := fork.Stop(); err != nil {
			b.Fatal(err)
		}
	}
	total := time.Since(start)
	slices.Sort(took)
	b.ReportMetric(ms(took[len(took)/2]), "ms/median")
	b.ReportMetric(ms(took[len(took)*9/10]), "ms/p90")
	b.ReportMetric(ms(total)/float64(len(took)), "ms/fork+stop")
}
