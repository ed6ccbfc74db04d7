package metrics_test

import (
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/opemu/opemu/metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// value gathers the registry and returns the value of the sample name{labels}.
func value(t *testing.T, r *metrics.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := r.Gatherer().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return -1
}

func TestEveryMetricMoves(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		record func(r *metrics.Registry)
		metric string
		labels map[string]string
		want   float64
	}{
		{"request", func(r *metrics.Registry) { r.ObserveRequest("POST", "applications", 201, time.Millisecond) }, "apiserver_request_total", map[string]string{"verb": "POST", "resource": "applications", "code": "201"}, 1},
		{"request duration", func(r *metrics.Registry) { r.ObserveRequest("GET", "applications", 200, time.Millisecond) }, "apiserver_request_duration_seconds", map[string]string{"verb": "GET", "resource": "applications"}, 1},
		{"webhook", func(r *metrics.Registry) { r.ObserveWebhook("validator", "CREATE", false, time.Microsecond) }, "webhook_requests_total", map[string]string{"webhook": "validator", "operation": "CREATE", "allowed": "false"}, 1},
		{"webhook duration", func(r *metrics.Registry) { r.ObserveWebhook("defaulter", "CREATE", true, time.Microsecond) }, "webhook_duration_seconds", map[string]string{"webhook": "defaulter"}, 1},
		{"watch clients", func(r *metrics.Registry) { r.WatchStarted("sse"); r.WatchStarted("sse"); r.WatchEnded("sse") }, "watch_clients", map[string]string{"protocol": "sse"}, 1},
		{"reconcile", func(r *metrics.Registry) { r.ObserveReconcile("application", "success", time.Millisecond) }, "controller_reconcile_total", map[string]string{"controller": "application", "result": "success"}, 1},
		{"reconcile duration", func(r *metrics.Registry) { r.ObserveReconcile("application", "error", time.Millisecond) }, "controller_reconcile_duration_seconds", map[string]string{"controller": "application"}, 1},
		{"reconcile errors", func(r *metrics.Registry) { r.ReconcileError("application") }, "controller_reconcile_errors_total", map[string]string{"controller": "application"}, 1},
		{"events", func(r *metrics.Registry) { r.RecordEvent("Warning", "Critical") }, "event_total", map[string]string{"type": "Warning", "severity": "Critical"}, 1},
		{"leader", func(r *metrics.Registry) { r.SetLeader(true) }, "leader_election_status", nil, 1},
		{"transitions", func(r *metrics.Registry) { r.LeaderTransition(); r.LeaderTransition() }, "leader_transitions_total", nil, 2},
		{"queue depth", func(r *metrics.Registry) { r.QueueDepth("application", 7) }, "workqueue_depth", map[string]string{"name": "application"}, 7},
		{"queue adds", func(r *metrics.Registry) { r.QueueAdd("application") }, "workqueue_adds_total", map[string]string{"name": "application"}, 1},
		{"queue retries", func(r *metrics.Registry) { r.QueueRetry("application") }, "workqueue_retries_total", map[string]string{"name": "application"}, 1},
		{"faults injected", func(r *metrics.Registry) { r.FaultInjected("conflicts"); r.FaultInjected("conflicts") }, "faults_injected_total", map[string]string{"fault": "conflicts"}, 2},
		{"resource count", func(r *metrics.Registry) {
			r.SetResourceCounts(func() []metrics.Count {
				return []metrics.Count{{Labels: [2]string{"applications", "default"}, Value: 3}}
			})
		}, "resource_count", map[string]string{"kind": "applications", "namespace": "default"}, 3},
		{"phase count", func(r *metrics.Registry) {
			r.SetPhaseCounts(func() []metrics.Count {
				return []metrics.Count{{Labels: [2]string{"Application", "Running"}, Value: 2}}
			})
		}, "resource_phase_count", map[string]string{"kind": "Application", "phase": "Running"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := metrics.New()
			tt.record(r)
			assert.Equal(t, tt.want, value(t, r, tt.metric, tt.labels))
		})
	}
}

func TestNilRegistryIsSafe(t *testing.T) {
	t.Parallel()
	var r *metrics.Registry
	assert.NotPanics(t, func() {
		r.ObserveRequest("GET", "x", 200, 0)
		r.ObserveWebhook("w", "CREATE", true, 0)
		r.WatchStarted("sse")
		r.WatchEnded("sse")
		r.ObserveReconcile("c", "success", 0)
		r.ReconcileError("c")
		r.RecordEvent("Normal", "Info")
		r.SetLeader(true)
		r.LeaderTransition()
		r.QueueDepth("q", 1)
		r.QueueAdd("q")
		r.QueueRetry("q")
		r.SetResourceCounts(nil)
		r.SetPhaseCounts(nil)
		_ = r.Handler()
		_ = r.Gatherer()
	})
}

func TestHandlerAndIsolation(t *testing.T) {
	t.Parallel()
	a, b := metrics.New(), metrics.New()
	a.ObserveRequest("GET", "applications", 200, time.Millisecond)
	assert.Equal(t, float64(1), value(t, a, "apiserver_request_total", map[string]string{"code": "200", "verb": "GET", "resource": "applications"}))
	assert.Equal(t, float64(-1), value(t, b, "apiserver_request_total", map[string]string{"code": "200"}), "registries share nothing")

	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	assert.Contains(t, string(body), "process_start_time_seconds")
	assert.Contains(t, string(body), `apiserver_request_total{code="200",resource="applications",verb="GET"} 1`)
	assert.Contains(t, string(body), "go_goroutines")
}
