package reconciler

import (
	"sync/atomic"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/metrics"
	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// newQueue is client-go's rate-limiting work queue: per-key exponential backoff from base to
// max and an overall token bucket; a rate-limited requeue waits for the larger of the two.
func newQueue(name string, base, max time.Duration, qps float64, burst int, m *metrics.Registry, clk clock.WithTicker) workqueue.TypedRateLimitingInterface[cache.Key] {
	limiter := workqueue.NewTypedMaxOfRateLimiter[cache.Key](
		workqueue.NewTypedItemExponentialFailureRateLimiter[cache.Key](base, max),
		&workqueue.TypedBucketRateLimiter[cache.Key]{Limiter: rate.NewLimiter(rate.Limit(qps), burst)},
	)
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[cache.Key]{
		Name:            name,
		MetricsProvider: queueMetrics{m},
		Clock:           clk,
	})
}

// queueMetrics feeds workqueue_depth, workqueue_adds_total and workqueue_retries_total.
type queueMetrics struct{ m *metrics.Registry }

func (p queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return &depth{m: p.m, name: name}
}
func (p queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return counter(func() { p.m.QueueAdd(name) })
}
func (p queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return counter(func() { p.m.QueueRetry(name) })
}
func (queueMetrics) NewLatencyMetric(string) workqueue.HistogramMetric      { return noop{} }
func (queueMetrics) NewWorkDurationMetric(string) workqueue.HistogramMetric { return noop{} }
func (queueMetrics) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noop{}
}
func (queueMetrics) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noop{}
}

type depth struct {
	m    *metrics.Registry
	name string
	n    atomic.Int64
}

func (d *depth) Inc() { d.m.QueueDepth(d.name, int(d.n.Add(1))) }
func (d *depth) Dec() { d.m.QueueDepth(d.name, int(d.n.Add(-1))) }

type counter func()

func (c counter) Inc() { c() }

type noop struct{}

func (noop) Observe(float64) {}
func (noop) Set(float64)     {}
