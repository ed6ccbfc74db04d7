package reconciler

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/metrics"
	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// queue is client-go's rate-limiting work queue (a delaying queue plus a rate limiter: per-key
// exponential backoff from base to max and an overall token bucket; a rate-limited requeue
// waits for the larger of the two), composed here as client-go composes it, so that it can also
// say what it holds: client-go's queue does not show its contents, and SPEC §16 shows each key,
// when it is next due and its failure count. The bookkeeping follows every call; it is not a
// second queue.
type queue struct {
	q   workqueue.TypedDelayingInterface[cache.Key]
	rl  workqueue.TypedRateLimiter[cache.Key]
	clk clock.PassiveClock

	// mu guards items. Calls that add hold it across the queue call, so a Get's bookkeeping
	// always comes after the Add that made the key available.
	mu    sync.Mutex
	items map[cache.Key]queued
}

// queued is what the queue holds for one key.
type queued struct {
	ready      bool      // in the queue now (or to be requeued when its processing is done)
	waiting    time.Time // a delayed add is pending until then (zero: none)
	processing bool      // a worker has it
}

func newQueue(name string, base, max time.Duration, qps float64, burst int, m *metrics.Registry, clk clock.WithTicker) *queue {
	return &queue{
		q: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[cache.Key]{
			Name:            name,
			MetricsProvider: queueMetrics{m},
			Clock:           clk,
		}),
		rl: workqueue.NewTypedMaxOfRateLimiter[cache.Key](
			workqueue.NewTypedItemExponentialFailureRateLimiter[cache.Key](base, max),
			&workqueue.TypedBucketRateLimiter[cache.Key]{Limiter: rate.NewLimiter(rate.Limit(qps), burst)},
		),
		clk:   clk,
		items: map[cache.Key]queued{},
	}
}

// setLocked stores key's record, or forgets it once the queue holds nothing of key. Records
// are values: a key queued and taken costs no allocation.
func (q *queue) setLocked(key cache.Key, it queued) {
	if !it.ready && it.waiting.IsZero() && !it.processing {
		delete(q.items, key)
		return
	}
	q.items[key] = it
}

// Add queues key now (once, however often it is added before a worker takes it).
func (q *queue) Add(key cache.Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.q.ShuttingDown() {
		return
	}
	q.q.Add(key)
	it := q.items[key]
	it.ready = true
	q.setLocked(key, it)
}

// AddAfter queues key once d has passed on the clock.
func (q *queue) AddAfter(key cache.Key, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.q.ShuttingDown() {
		return
	}
	q.q.AddAfter(key, d)
	it := q.items[key]
	if d <= 0 {
		it.ready = true
	} else if at := q.clk.Now().Add(d); it.waiting.IsZero() || at.Before(it.waiting) {
		// The delaying queue keeps one pending add per key, the earliest.
		it.waiting = at
	}
	q.setLocked(key, it)
}

// AddRateLimited queues key after the rate limiter's wait (one more failure of key).
func (q *queue) AddRateLimited(key cache.Key) { q.AddAfter(key, q.rl.When(key)) }

// NumRequeues is how many failures of key the rate limiter counts.
func (q *queue) NumRequeues(key cache.Key) int { return q.rl.NumRequeues(key) }

// Forget resets key's failure count.
func (q *queue) Forget(key cache.Key) { q.rl.Forget(key) }

// Get blocks until a key is due (or the queue shuts down) and hands it to the caller, who must
// call Done with it.
func (q *queue) Get() (cache.Key, bool) {
	key, shutdown := q.q.Get()
	if shutdown {
		return key, true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	it := q.items[key]
	it.ready, it.processing = false, true
	if !it.waiting.IsZero() && !it.waiting.After(q.clk.Now()) {
		it.waiting = time.Time{} // its delayed add is what made it ready
	}
	q.setLocked(key, it)
	return key, false
}

// Done ends the processing of key; a key added meanwhile is queued again.
func (q *queue) Done(key cache.Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.q.Done(key)
	if it, ok := q.items[key]; ok {
		it.processing = false
		q.setLocked(key, it)
	}
}

// putBack returns a key Get handed out, unprocessed, to the back of the queue.
func (q *queue) putBack(key cache.Key) {
	q.Add(key)
	q.Done(key)
}

// Len is how many keys are due now, waiting for a worker.
func (q *queue) Len() int { return q.q.Len() }

// ShutDown stops the queue: later adds are ignored, and Get returns shutdown once the keys
// due are handed out.
func (q *queue) ShutDown() { q.q.ShutDown() }

// QueueItem is one key a controller's queue holds, as GET /controller shows it.
type QueueItem struct {
	Key cache.Key `json:"-"`
	// Object names it: "namespace/name", or "name" for a cluster-scoped object.
	Object string `json:"object"`
	// State is "due" (waiting for a worker), "waiting" (until Due) or "processing".
	State string `json:"state"`
	// Due is when the key is next due: now for a due key, the end of its wait for a waiting
	// one; a key being processed that is also waiting shows that wait.
	Due time.Time `json:"due,omitzero"`
	// Failures is the failure count the next retry's backoff is computed from.
	Failures int `json:"failures"`
}

// view returns what the queue holds: keys being processed, then due ones, then waiting ones
// by due time.
func (q *queue) view() []QueueItem {
	now := q.clk.Now()
	q.mu.Lock()
	out := make([]QueueItem, 0, len(q.items))
	for key, it := range q.items {
		qi := QueueItem{Key: key, Object: objectName(key)}
		switch {
		case it.processing:
			qi.State = "processing"
			qi.Due = it.waiting
			if it.ready {
				qi.Due = now
			}
		case it.ready || !it.waiting.After(now):
			qi.State, qi.Due = "due", now
		default:
			qi.State, qi.Due = "waiting", it.waiting
		}
		out = append(out, qi)
	}
	q.mu.Unlock()
	for i := range out {
		out[i].Failures = q.rl.NumRequeues(out[i].Key)
	}
	slices.SortFunc(out, func(a, b QueueItem) int {
		if c := cmpDue(a, b); c != 0 {
			return c
		}
		return strings.Compare(a.Object, b.Object)
	})
	return out
}

// cmpDue orders by state (processing, due, waiting), then by due time.
func cmpDue(a, b QueueItem) int {
	rank := map[string]int{"processing": 0, "due": 1, "waiting": 2}
	if c := rank[a.State] - rank[b.State]; c != 0 {
		return c
	}
	return a.Due.Compare(b.Due)
}

func objectName(k cache.Key) string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
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
