package faults_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/opemu/opemu/app/apptest"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/faults"
	"github.com/opemu/opemu/metrics"
	"github.com/opemu/opemu/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

var ctx = context.Background()

// rig is the standard core (the Fault CRD served) and a running Engine, inside a synctest
// bubble: synctest.Wait returns once the engine has seen every write and written its status.
type rig struct {
	t       *testing.T
	reg     *registry.Store
	client  *registry.Client
	engine  *faults.Engine
	metrics *metrics.Registry
}

func newRig(t *testing.T, roll func() float64) *rig {
	t.Helper()
	core := apptest.New(t, apptest.Options{})
	m := metrics.New()
	e, err := faults.New(faults.Config{Client: core.Registry.Client("faults"), Metrics: m, Rand: roll})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = e.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	synctest.Wait()
	return &rig{t: t, reg: core.Registry, client: core.Registry.Client("test"), engine: e, metrics: m}
}

// apply creates the Fault name from spec (YAML) as a client would.
func (r *rig) apply(name, spec string) {
	r.t.Helper()
	var s map[string]any
	require.NoError(r.t, yaml.Unmarshal([]byte(spec), &s))
	_, err := r.client.Create(ctx, key(name), map[string]any{
		"apiVersion": "faults.opemu.dev/v1", "kind": "Fault", "metadata": map[string]any{"name": name}, "spec": s,
	})
	require.NoError(r.t, err)
	synctest.Wait()
}

func key(name string) cache.Key {
	return cache.Key{Group: faults.Resource.Group, Resource: faults.Resource.Resource, Name: name}
}

// status is the stored status of the Fault name.
func (r *rig) status(name string) map[string]any {
	r.t.Helper()
	o, err := r.client.Get(ctx, key(name))
	require.NoError(r.t, err)
	m, err := o.Decode()
	require.NoError(r.t, err)
	st, _ := m["status"].(map[string]any)
	return st
}

func (r *rig) injected(name string) int64 {
	r.t.Helper()
	n, _ := r.status(name)["injected"].(json.Number).Int64()
	return n
}

// fires sends req n times and returns how many were faulted.
func (r *rig) fires(req faults.Request, n int) int {
	fired := 0
	for range n {
		if inj := r.engine.Inject(req); inj != nil {
			fired++
		}
	}
	return fired
}

var statusUpdate = faults.Request{Verb: "update", Group: "cloudnative.elide.dev", Resource: "applications", Subresource: "status",
	Namespace: "default", Name: "web", UserAgent: "my-operator/v1.2 (linux/amd64)"}

func with(req faults.Request, f func(*faults.Request)) faults.Request {
	f(&req)
	return req
}

func TestMatch(t *testing.T) {
	tests := []struct {
		name  string
		match string
		req   faults.Request
		want  bool
	}{
		{"empty match: everything", `{}`, statusUpdate, true},
		{"verb", `{verbs: [update]}`, statusUpdate, true},
		{"other verb", `{verbs: [create, patch]}`, statusUpdate, false},
		{"group and resource", `{group: cloudnative.elide.dev, resource: applications}`, statusUpdate, true},
		{"core group", `{group: ""}`, statusUpdate, false},
		{"core group matches core", `{group: ""}`, with(statusUpdate, func(r *faults.Request) { r.Group, r.Resource = "", "configmaps" }), true},
		{"other resource", `{resource: deployments}`, statusUpdate, false},
		{"subresource", `{subresource: status}`, statusUpdate, true},
		{"main resource only", `{subresource: ""}`, statusUpdate, false},
		{"no subresource given: any", `{resource: applications}`, with(statusUpdate, func(r *faults.Request) { r.Subresource = "" }), true},
		{"namespace", `{namespace: default}`, statusUpdate, true},
		{"other namespace", `{namespace: prod}`, statusUpdate, false},
		{"name", `{name: web}`, statusUpdate, true},
		{"other name", `{name: api}`, statusUpdate, false},
		{"user agent prefix", `{userAgentPrefix: my-operator}`, statusUpdate, true},
		{"other user agent", `{userAgentPrefix: kubectl}`, statusUpdate, false},
		{"SSE over every resource", `{resource: applications, verbs: [watch]}`, faults.Request{Verb: "watch"}, true},
		{"SSE over applications", `{resource: applications}`, faults.Request{Verb: "watch", Resources: []cache.GroupResource{{Group: "", Resource: "events"}, {Group: "cloudnative.elide.dev", Resource: "applications"}}}, true},
		{"SSE over events only", `{resource: applications}`, faults.Request{Verb: "watch", Resources: []cache.GroupResource{{Group: "", Resource: "events"}}}, false},
		{"Faults are never faulted", `{}`, faults.Request{Verb: "delete", Group: "faults.opemu.dev", Resource: "faults", Name: "x"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, nil)
				r.apply("f", "{match: "+tt.match+", action: {status: 503}}")
				assert.Equal(t, tt.want, r.engine.Inject(tt.req) != nil)
			})
		})
	}
}

// TestEveryAndCount: every third matching request is faulted until count is reached; each
// is counted in faults_injected_total at once and in status.injected once the writer ran, and
// the Fault turns Exhausted.
func TestEveryAndCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		r.apply("third", `{match: {verbs: [update], subresource: status}, action: {status: 409}, every: 3, count: 2}`)
		assert.Equal(t, faults.PhaseActive, r.status("third")["phase"])
		var pattern []bool
		for range 9 {
			pattern = append(pattern, r.engine.Inject(statusUpdate) != nil)
		}
		assert.Equal(t, []bool{false, false, true, false, false, true, false, false, false}, pattern)
		assert.Equal(t, 2.0, metricValue(t, r.metrics, "third"))
		synctest.Wait()
		assert.Equal(t, int64(2), r.injected("third"))
		assert.Equal(t, faults.PhaseExhausted, r.status("third")["phase"])
		assert.NotEmpty(t, r.status("third")["lastInjectionTime"])
	})
}

// TestCountSurvivesUpdates: changing a Fault's spec keeps what it injected; raising its count
// makes it Active again.
func TestCountSurvivesUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		r.apply("f", `{action: {status: 500}, count: 1}`)
		require.Equal(t, 1, r.fires(statusUpdate, 3))
		synctest.Wait()
		o, err := r.client.Get(ctx, key("f"))
		require.NoError(t, err)
		m, err := o.Decode()
		require.NoError(t, err)
		m["spec"].(map[string]any)["count"] = 3
		assert.Equal(t, json.Number("1"), r.status("f")["observedGeneration"])
		_, err = r.client.Update(ctx, key("f"), m)
		require.NoError(t, err)
		synctest.Wait()
		assert.Equal(t, json.Number("2"), r.status("f")["observedGeneration"], "the engine applies the new spec")
		assert.Equal(t, 2, r.fires(statusUpdate, 5), "two more to reach 3")
		synctest.Wait()
		assert.Equal(t, int64(3), r.injected("f"))
		assert.Equal(t, faults.PhaseExhausted, r.status("f")["phase"])
	})
}

func TestProbability(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func() float64 { return 0.5 })
		r.apply("never", `{match: {verbs: [get]}, action: {status: 500}, probability: 0.4}`)
		r.apply("always", `{match: {verbs: [list]}, action: {status: 500}, probability: 0.6}`)
		r.apply("zero", `{match: {verbs: [create]}, action: {status: 500}, probability: 0}`)
		assert.Zero(t, r.fires(with(statusUpdate, func(r *faults.Request) { r.Verb = "get" }), 10))
		assert.Equal(t, 10, r.fires(with(statusUpdate, func(r *faults.Request) { r.Verb = "list" }), 10))
		assert.Zero(t, r.fires(with(statusUpdate, func(r *faults.Request) { r.Verb = "create" }), 10))
	})
}

// TestExpiry: a Fault stops at its expiry and says so in its phase, on the engine's clock.
func TestExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		r.apply("brief", `{action: {delay: 300ms}, expiresAfter: 10s}`)
		r.apply("dated", `{action: {delay: 300ms}, expiresAt: "`+time.Now().Add(time.Minute).UTC().Format(time.RFC3339)+`"}`)
		inj := r.engine.Inject(statusUpdate)
		require.NotNil(t, inj)
		assert.Equal(t, "brief", inj.Fault, "the first by name applies")
		assert.Equal(t, 300*time.Millisecond, inj.Delay)
		assert.Nil(t, inj.Err)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		assert.Equal(t, faults.PhaseExpired, r.status("brief")["phase"])
		inj = r.engine.Inject(statusUpdate)
		require.NotNil(t, inj)
		assert.Equal(t, "dated", inj.Fault)
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Nil(t, r.engine.Inject(statusUpdate))
		assert.Equal(t, faults.PhaseExpired, r.status("dated")["phase"])
	})
}

// TestDeleteTurnsItOff: once deleted, a Fault injects nothing.
func TestDeleteTurnsItOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		r.apply("f", `{action: {status: 503}}`)
		require.NotNil(t, r.engine.Inject(statusUpdate))
		_, _, err := r.client.Delete(ctx, key("f"), cache.Preconditions{})
		require.NoError(t, err)
		synctest.Wait()
		assert.Nil(t, r.engine.Inject(statusUpdate))
	})
}

// TestErrors: each status is the Status kube-apiserver would send for it, saying it was
// injected, with Retry-After where it applies.
func TestErrors(t *testing.T) {
	tests := []struct {
		status     int
		reason     metav1.StatusReason
		retryAfter int32
		extra      string
	}{
		{409, metav1.StatusReasonConflict, 0, ""},
		{410, metav1.StatusReasonExpired, 0, ""},
		{429, metav1.StatusReasonTooManyRequests, 1, ""},
		{500, metav1.StatusReasonInternalError, 0, ""},
		{503, metav1.StatusReasonServiceUnavailable, 5, ", retryAfterSeconds: 5"},
		{504, metav1.StatusReasonTimeout, 0, ""},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, nil)
				r.apply("boom", `{action: {status: `+itoa(tt.status)+`, message: "chaos drill"`+tt.extra+`}}`)
				inj := r.engine.Inject(statusUpdate)
				require.NotNil(t, inj)
				var se *apierrors.StatusError
				require.ErrorAs(t, inj.Err, &se)
				st := se.Status()
				assert.Equal(t, int32(tt.status), st.Code)
				assert.Equal(t, tt.reason, st.Reason)
				assert.Contains(t, st.Message, `injected by Fault "boom" (faults.opemu.dev): the request was not carried out: chaos drill`)
				var ra int32
				if st.Details != nil {
					ra = st.Details.RetryAfterSeconds
				}
				assert.Equal(t, tt.retryAfter, ra)
				if tt.status == 409 {
					assert.True(t, apierrors.IsConflict(inj.Err))
					assert.Equal(t, "web", st.Details.Name)
				}
			})
		})
	}
}

// TestWatchActions: a watch-only Fault touches only watches, and counts a stream it ends,
// not one whose client left first; an armed watch fault holds its place in count.
func TestWatchActions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		r.apply("expire", `{match: {resource: applications}, action: {watch: {closeAfter: 5s, expire: true}}, count: 1}`)
		watch := faults.Request{Verb: "watch", Group: "cloudnative.elide.dev", Resource: "applications", Namespace: "default"}
		assert.Nil(t, r.engine.Inject(statusUpdate), "not a watch")

		left := r.engine.Inject(watch)
		require.NotNil(t, left)
		assert.Equal(t, &faults.WatchAction{CloseAfter: 5 * time.Second, Expire: true}, left.Watch)
		assert.Nil(t, r.engine.Inject(watch), "count 1 is held by the armed watch")
		left.WatchDone(false)
		synctest.Wait()
		assert.Zero(t, r.injected("expire"))

		ended := r.engine.Inject(watch)
		require.NotNil(t, ended)
		assert.True(t, apierrors.IsResourceExpired(ended.ExpiredStatus()))
		ended.WatchDone(true)
		ended.WatchDone(true)
		synctest.Wait()
		assert.Equal(t, int64(1), r.injected("expire"))
		assert.Equal(t, faults.PhaseExhausted, r.status("expire")["phase"])
		assert.Equal(t, 1.0, metricValue(t, r.metrics, "expire"))
	})
}

// TestInvalid: what the schema cannot refuse, the engine reports as phase Invalid; what it
// can, the write path refuses.
func TestInvalid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		r.apply("empty", `{action: {message: "no effect"}}`)
		assert.Equal(t, faults.PhaseInvalid, r.status("empty")["phase"])
		assert.Equal(t, "spec.action needs a status, a delay or a watch action", r.status("empty")["message"])
		assert.Nil(t, r.engine.Inject(statusUpdate))

		for _, spec := range []string{
			`{action: {status: 404}}`,
			`{action: {delay: soon}}`,
			`{action: {}}`,
			`{action: {status: 500}, probability: 2}`,
			`{match: {verbs: [escalate]}, action: {status: 500}}`,
			`{action: {status: 500}, expiresAt: tomorrow}`,
		} {
			var s map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(spec), &s))
			_, err := r.client.Create(ctx, key("bad"), map[string]any{
				"apiVersion": "faults.opemu.dev/v1", "kind": "Fault", "metadata": map[string]any{"name": "bad"}, "spec": s,
			})
			assert.True(t, apierrors.IsInvalid(err), "%s: %v", spec, err)
		}
	})
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// metricValue is faults_injected_total{fault=name}.
func metricValue(t *testing.T, m *metrics.Registry, name string) float64 {
	t.Helper()
	mfs, err := m.Gatherer().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "faults_injected_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			if s.GetLabel()[0].GetValue() == name {
				return s.GetCounter().GetValue()
			}
		}
	}
	return 0
}
