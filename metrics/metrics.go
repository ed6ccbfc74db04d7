// Package metrics owns every Prometheus metric of opemu on a private registry (no global
// registration, no init). Recording methods are typed and nil-safe: a nil *Registry records
// nothing, so packages take one in their Config and never check it.
//
// Concurrency: all methods are safe for concurrent use.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry is opemu's private Prometheus registry and its collectors.
type Registry struct {
	reg *prometheus.Registry

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	webhooks        *prometheus.CounterVec
	webhookDuration *prometheus.HistogramVec
	watchClients    *prometheus.GaugeVec
	reconciles      *prometheus.CounterVec
	reconcileErrors *prometheus.CounterVec
	reconcileTime   *prometheus.HistogramVec
	events          *prometheus.CounterVec
	leader          prometheus.Gauge
	transitions     prometheus.Counter
	queueDepth      *prometheus.GaugeVec
	queueAdds       *prometheus.CounterVec
	queueRetries    *prometheus.CounterVec
	faultsInjected  *prometheus.CounterVec
	resourceCount   *funcCollector
	phaseCount      *funcCollector
}

// New returns a registry with every opemu metric plus the Go runtime and process collectors
// (the latter exports process_start_time_seconds).
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { r.reg.MustRegister(c) }
	r.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "apiserver_request_total", Help: "API requests by verb, resource and HTTP code."}, []string{"verb", "resource", "code"})
	r.requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "apiserver_request_duration_seconds", Help: "API request latency.", Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}, []string{"verb", "resource"})
	r.webhooks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "webhook_requests_total", Help: "Admission handler calls by webhook, operation and outcome."}, []string{"webhook", "operation", "allowed"})
	r.webhookDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "webhook_duration_seconds", Help: "Admission handler latency.", Buckets: []float64{.00001, .00005, .0001, .0005, .001, .005, .01, .05}}, []string{"webhook"})
	r.watchClients = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "watch_clients", Help: "Open watch streams by protocol."}, []string{"protocol"})
	r.reconciles = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "controller_reconcile_total", Help: "Reconciles by controller and result."}, []string{"controller", "result"})
	r.reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "controller_reconcile_errors_total", Help: "Failed reconciles by controller."}, []string{"controller"})
	r.reconcileTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "controller_reconcile_duration_seconds", Help: "Reconcile latency.", Buckets: prometheus.DefBuckets}, []string{"controller"})
	r.events = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "event_total", Help: "Events recorded by type and severity."}, []string{"type", "severity"})
	r.leader = prometheus.NewGauge(prometheus.GaugeOpts{Name: "leader_election_status", Help: "1 while this process leads, else 0."})
	r.transitions = prometheus.NewCounter(prometheus.CounterOpts{Name: "leader_transitions_total", Help: "Times this process gained or lost the lease."})
	r.queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "Keys waiting in the work queue."}, []string{"name"})
	r.queueAdds = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total", Help: "Keys added to the work queue."}, []string{"name"})
	r.queueRetries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_retries_total", Help: "Rate-limited requeues."}, []string{"name"})
	r.faultsInjected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faults_injected_total", Help: "Faults injected into client requests, by Fault name."}, []string{"fault"})
	r.resourceCount = newFuncCollector("resource_count", "Stored objects by kind and namespace.", "kind", "namespace")
	r.phaseCount = newFuncCollector("resource_phase_count", "Stored objects by kind and status phase.", "kind", "phase")
	for _, c := range []prometheus.Collector{r.requests, r.requestDuration, r.webhooks, r.webhookDuration, r.watchClients,
		r.reconciles, r.reconcileErrors, r.reconcileTime, r.events, r.leader, r.transitions, r.queueDepth, r.queueAdds,
		r.queueRetries, r.faultsInjected, r.resourceCount, r.phaseCount,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	return r
}

// Handler serves the registry in the Prometheus text format.
func (r *Registry) Handler() http.Handler {
	if r == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})
}

// Gatherer exposes the registry for tests and embedding.
func (r *Registry) Gatherer() prometheus.Gatherer {
	if r == nil {
		return prometheus.NewRegistry()
	}
	return r.reg
}

// ObserveRequest records one API request.
func (r *Registry) ObserveRequest(verb, resource string, code int, d time.Duration) {
	if r == nil {
		return
	}
	r.requests.WithLabelValues(verb, resource, strconv.Itoa(code)).Inc()
	r.requestDuration.WithLabelValues(verb, resource).Observe(d.Seconds())
}

// ObserveWebhook records one admission handler call.
func (r *Registry) ObserveWebhook(webhook, operation string, allowed bool, d time.Duration) {
	if r == nil {
		return
	}
	r.webhooks.WithLabelValues(webhook, operation, strconv.FormatBool(allowed)).Inc()
	r.webhookDuration.WithLabelValues(webhook).Observe(d.Seconds())
}

// WatchStarted and WatchEnded track open watch streams ("sse" or "kubernetes").
func (r *Registry) WatchStarted(protocol string) {
	if r != nil {
		r.watchClients.WithLabelValues(protocol).Inc()
	}
}

// WatchEnded is the pair of WatchStarted.
func (r *Registry) WatchEnded(protocol string) {
	if r != nil {
		r.watchClients.WithLabelValues(protocol).Dec()
	}
}

// ObserveReconcile records one reconcile and its result ("success", "error", "requeue", ...).
func (r *Registry) ObserveReconcile(controller, result string, d time.Duration) {
	if r == nil {
		return
	}
	r.reconciles.WithLabelValues(controller, result).Inc()
	r.reconcileTime.WithLabelValues(controller).Observe(d.Seconds())
}

// ReconcileError counts a failed reconcile.
func (r *Registry) ReconcileError(controller string) {
	if r != nil {
		r.reconcileErrors.WithLabelValues(controller).Inc()
	}
}

// RecordEvent counts one recorded Event.
func (r *Registry) RecordEvent(eventType, severity string) {
	if r != nil {
		r.events.WithLabelValues(eventType, severity).Inc()
	}
}

// SetLeader sets leader_election_status.
func (r *Registry) SetLeader(leading bool) {
	if r == nil {
		return
	}
	v := 0.0
	if leading {
		v = 1
	}
	r.leader.Set(v)
}

// LeaderTransition counts a gain or loss of the lease.
func (r *Registry) LeaderTransition() {
	if r != nil {
		r.transitions.Inc()
	}
}

// QueueDepth sets the depth of work queue name.
func (r *Registry) QueueDepth(name string, n int) {
	if r != nil {
		r.queueDepth.WithLabelValues(name).Set(float64(n))
	}
}

// QueueAdd counts a key added to work queue name.
func (r *Registry) QueueAdd(name string) {
	if r != nil {
		r.queueAdds.WithLabelValues(name).Inc()
	}
}

// QueueRetry counts a rate-limited requeue in work queue name.
func (r *Registry) QueueRetry(name string) {
	if r != nil {
		r.queueRetries.WithLabelValues(name).Inc()
	}
}

// FaultInjected counts one fault injected into a client request by the Fault named fault.
func (r *Registry) FaultInjected(fault string) {
	if r != nil {
		r.faultsInjected.WithLabelValues(fault).Inc()
	}
}

// Count is one sample of a gauge computed at scrape time.
type Count struct {
	Labels [2]string
	Value  float64
}

// SetResourceCounts makes resource_count{kind,namespace} read fn at every scrape. The store
// keeps the counts current; fn only reads them. A later call replaces fn.
func (r *Registry) SetResourceCounts(fn func() []Count) {
	if r != nil {
		r.resourceCount.set(fn)
	}
}

// SetPhaseCounts makes resource_phase_count{kind,phase} read fn at every scrape.
func (r *Registry) SetPhaseCounts(fn func() []Count) {
	if r != nil {
		r.phaseCount.set(fn)
	}
}

// funcCollector is a gauge whose samples come from a function at scrape time.
type funcCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	fn   func() []Count
}

func newFuncCollector(name, help string, labels ...string) *funcCollector {
	return &funcCollector{desc: prometheus.NewDesc(name, help, labels, nil)}
}

func (c *funcCollector) set(fn func() []Count) {
	c.mu.Lock()
	c.fn = fn
	c.mu.Unlock()
}

func (c *funcCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *funcCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	fn := c.fn
	c.mu.Unlock()
	if fn == nil {
		return
	}
	for _, s := range fn() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, s.Value, s.Labels[0], s.Labels[1])
	}
}
